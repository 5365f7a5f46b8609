import type { z } from "zod";
import { budgetsText, inUseText, keyText, LimitBudgets, windowsOf, windowText } from "../lib/limit-text.ts";
import { DefinitionList, DefinitionRecord, LimitStatus, type RunView } from "../schemas/index.ts";
import { CliError } from "./api.ts";
import type { Exit, Io } from "./commands.ts";

/** A limit as `trellis limits` prints it: its definition's version and budgets, and its status for one key. */
interface LimitLine {
  id: string;
  version: number;
  budgets: LimitBudgets;
  status: LimitStatus;
}

const limitPath = (id: string) => `/v1/limits/${encodeURIComponent(id)}`;
const statusPath = (id: string, key: string) => `${limitPath(id)}/status?${new URLSearchParams({ key }).toString()}`;

/** An answer the CLI reads fields of, parsed with its schema: a body of another shape is `cli.bad_response`. */
async function read<T>(io: Io, schema: z.ZodType<T>, path: string): Promise<T> {
  const parsed = schema.safeParse(await io.api.json("GET", path));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined ? "" : ` at ${issue.path.join(".") || "the root"}: ${issue.message}`;
    throw new CliError("cli.bad_response", `${path} answered an unexpected body${where}`);
  }
  return parsed.data;
}

/** The latest version of a limit (or `version`) and its status for `key`. */
async function limitLine(io: Io, id: string, key: string, version?: number): Promise<LimitLine> {
  const [record, status] = await Promise.all([
    read(io, DefinitionRecord, version === undefined ? limitPath(id) : `${limitPath(id)}/versions/${version}`),
    read(io, LimitStatus, statusPath(id, key)),
  ]);
  return { id, version: record.version, budgets: LimitBudgets.parse(record.definition), status };
}

/**
 * `trellis limits`: every limit (`GET /v1/limits`), with its budgets and its
 * status for the key `""`, as a table: id, budgets, in use, waiting, window
 * used, resets at (and paused until, when a limit is paused).
 */
export async function limitsCommand(io: Io): Promise<Exit> {
  const list = await read(io, DefinitionList, "/v1/limits?limit=100");
  const lines = await Promise.all(
    list.definitions.map((definition) => limitLine(io, definition.id, "", definition.version)),
  );
  if (io.json) {
    io.out.write(`${JSON.stringify({ limits: lines }, null, 2)}\n`);
  } else {
    io.out.write(`${lines.length === 0 ? "no limits" : limitsTable(lines)}\n`);
  }
  return 0;
}

/** The limits as a table, a row each, columns padded to their widest cell. */
export function limitsTable(lines: readonly LimitLine[]): string {
  const paused = lines.some((line) => line.status.paused_until !== null);
  const header = [
    "id",
    "budgets",
    "in use",
    "waiting",
    "window used",
    "resets at",
    ...(paused ? ["paused until"] : []),
  ];
  const rows = lines.map((line) => {
    const windows = windowsOf(line.status, line.budgets);
    return [
      `${line.id}@${line.version}`,
      budgetsText(line.budgets),
      inUseText(line.status, line.budgets),
      String(line.status.waiting),
      windows.length === 0 ? "-" : windows.map(windowText).join(", "),
      windows.length === 0 ? "-" : windows.map((window) => window.resets_at ?? "-").join(", "),
      ...(paused ? [line.status.paused_until ?? "-"] : []),
    ];
  });
  return table([header, ...rows]);
}

function table(rows: readonly string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** `trellis limits status <id> [--key K]`: one limit's status for one key (default `""`). */
export async function limitStatusCommand(io: Io, id: string, key = ""): Promise<Exit> {
  const line = await limitLine(io, id, key);
  io.out.write(`${io.json ? JSON.stringify(line.status, null, 2) : statusText(line)}\n`);
  return 0;
}

/** One status in lines: which limit and key, its budgets, the slots, each window, a pause. */
export function statusText(line: LimitLine): string {
  const { status, budgets } = line;
  return [
    `${line.id}@${line.version}  key ${keyText(status.key)}  ${budgetsText(budgets)}`,
    `  in use   ${inUseText(status, budgets)}`,
    `  waiting  ${status.waiting}`,
    ...windowsOf(status, budgets).map(
      (window) => `  ${windowText(window)}  resets ${window.resets_at ?? "- (nothing counted)"}`,
    ),
    ...(status.paused_until === null ? [] : [`  paused until ${status.paused_until} (a 429 with Retry-After)`]),
  ].join("\n");
}

/**
 * What a run's limits say in `trellis show`: its priority and its workflow's
 * limits (held or waiting, with the key), and each step waiting for room in a
 * limit; nothing when no limit concerns the run.
 */
export function runLimitLines(view: RunView): string[] {
  const uses = view.limits ?? [];
  const waits = view.waiting_for.flatMap((wait) => (wait.kind === "limit" ? [wait] : []));
  if (uses.length === 0 && waits.length === 0) {
    return [];
  }
  return [
    `priority ${view.priority}`,
    ...uses.map((use) => `  limit ${use.limit} key ${keyText(use.key)} ${use.status} since ${use.since}`),
    ...waits.map((wait) => {
      const where = `${wait.node}${wait.item === null ? "" : `[${wait.item}]`}${wait.step === null ? "" : ` ${wait.step}`}`;
      return `  ${where} waits for limit ${wait.limit} key ${keyText(wait.key)} since ${wait.since}`;
    }),
  ];
}
