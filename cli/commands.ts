import { existsSync, readFileSync } from "node:fs";
import type { RunPlan } from "../coordinator/plan.ts";
import { formatReport } from "../lib/journal/index.ts";
import type { GateView, RunView } from "../schemas/index.ts";
import { CliError, type Api } from "./api.ts";
import { bundleFiles, define } from "./define.ts";
import { runEntries } from "./events.ts";
import { follow } from "./follow.ts";
import { entryLine, previewText, runText } from "./format.ts";
import { verify } from "./verify.ts";

/** What every command gets: the API, how to print, and whether to print raw JSON. */
export interface Io {
  api: Api;
  json: boolean;
  out: NodeJS.WriteStream;
}

/** A command's exit status: 0 done, 1 the thing it did or watched failed. */
export type Exit = 0 | 1;

const print = (io: Io, value: unknown, text: () => string): void => {
  io.out.write(`${io.json ? JSON.stringify(value, null, 2) : text()}\n`);
};
const runPath = (runId: string) => `/v1/runs/${encodeURIComponent(runId)}`;

export async function defineCommand(io: Io, paths: string[]): Promise<Exit> {
  const answer = await define(io.api, bundleFiles(paths));
  print(io, answer, () =>
    answer.created
      .map((item) => `${item.existing ? "reused " : "created"}  ${item.kind.padEnd(11)} ${item.id}@${item.version}`)
      .join("\n"),
  );
  for (const warning of io.json ? [] : (answer.warnings ?? [])) {
    process.stderr.write(`warning: ${warning.path}: ${warning.message}\n`);
  }
  for (const file of io.json ? [] : (answer.skipped ?? [])) {
    process.stderr.write(`skipped ${file}: not a definition bundle (no workflows, tasks, actions, …)\n`);
  }
  return 0;
}

export interface RunOptions {
  input?: string;
  version?: string;
  mode?: string;
  idempotencyKey?: string;
  priority?: string;
  wait?: boolean;
  follow?: boolean;
}

export async function runCommand(io: Io, workflow: string, options: RunOptions): Promise<Exit> {
  const body = {
    input: options.input === undefined ? {} : readInput(options.input),
    ...(options.version === undefined ? {} : { version: toVersion(options.version) }),
    ...(options.mode === undefined ? {} : { mode: options.mode }),
    ...(options.idempotencyKey === undefined ? {} : { idempotency_key: options.idempotencyKey }),
    ...(options.priority === undefined ? {} : { priority: toPriority(options.priority) }),
  };
  // `--wait` asks the start itself to wait (Prefer: wait, docs/api.md): a short run is over when it answers.
  const waits = options.wait === true && options.follow !== true;
  const started = await io.api.json<StartedRun>("POST", `/v1/workflows/${encodeURIComponent(workflow)}/runs`, {
    body,
    headers: waits ? { prefer: `wait=${START_WAIT_S}` } : {},
  });
  if (started.run_id === null) {
    print(io, started, () => (started.plan ? previewText(started.workflow, started.plan) : started.status));
    return 0;
  }
  if (!(options.wait || options.follow)) {
    print(io, started, () => `${started.run_id}  ${started.status}`);
    return 0;
  }
  if (waits && ENDED.has(started.status)) {
    return printEnded(io, started.run_id);
  }
  return awaitRun(io, started.run_id, options);
}

/** What a start answers (docs/api.md): a preview has no run, and carries the resolved plan. */
interface StartedRun {
  run_id: string | null;
  status: string;
  workflow: { id: string; version: number };
  plan?: RunPlan;
}

/** How long `run --wait` asks its start to wait for the run (the most the API waits); a longer run is followed. */
const START_WAIT_S = 60;
const ENDED = new Set(["completed", "failed", "cancelled"]);

/** A run that had ended when its start answered: printed as `--wait` prints a run it followed to its end. */
async function printEnded(io: Io, runId: string): Promise<Exit> {
  if (!io.json) {
    io.out.write(`${runId}  started\n`);
  }
  const view = await io.api.json<RunView>("GET", runPath(runId));
  print(io, view, () => runText(view));
  return view.status === "completed" ? 0 : 1;
}

/** `--wait` / `--follow` of a run just started (by `run` or `plan`): prints where it ended; exit 0 when it completed. */
export async function awaitRun(io: Io, runId: string, options: { follow?: boolean }): Promise<Exit> {
  if (!io.json) {
    io.out.write(`${runId}  started\n`);
  }
  const live = Boolean(options.follow) && io.out.isTTY === true && !io.json;
  const lines = Boolean(options.follow) && !live && !io.json;
  const view = await follow(io.api, runId, { live, lines, out: io.out });
  print(io, view, () => runText(view));
  return view.status === "completed" ? 0 : 1;
}

/** A flag's JSON (`--input`, `answer`'s `--json`): a JSON value, or the name of a file that holds one. */
export function readInput(input: string, flag = "--input"): unknown {
  const file = existsSync(input);
  const text = file ? readFileSync(input, "utf8") : input;
  try {
    return JSON.parse(text);
  } catch (thrown) {
    const why = thrown instanceof Error ? `: ${thrown.message}` : "";
    throw new CliError(
      "cli.invalid_input",
      file
        ? `${flag} names the file ${input}, which does not hold JSON${why}`
        : `${flag} is neither a JSON value nor a file${why}: ${input.slice(0, 80)}`,
    );
  }
}

function toVersion(version: string): number {
  const number = Number(version);
  if (!Number.isInteger(number) || number < 1) {
    throw new CliError("cli.invalid_version", `--version must be a version number, not ${version}`);
  }
  return number;
}

/** A run's place in the queues of limits (docs/api.md): an integer from 0 to 9. */
function toPriority(priority: string): number {
  const number = Number(priority);
  if (priority.trim() === "" || !Number.isInteger(number) || number < 0 || number > 9) {
    throw new CliError(
      "cli.invalid_priority",
      `--priority must be an integer from 0 (lowest) to 9 (highest), not ${priority}`,
    );
  }
  return number;
}

export interface RunsOptions {
  workflow?: string;
  status?: string;
  parent?: string;
  limit?: string;
  cursor?: string;
}

interface RunListing {
  runs: {
    run_id: string;
    workflow: { id: string; version: number };
    status: string;
    created_at: string;
    deleted_at?: string | null;
    error: { code: string } | null;
  }[];
  next_cursor: string | null;
}

export async function runsCommand(io: Io, options: RunsOptions): Promise<Exit> {
  const filters = ["workflow", "status", "parent", "limit", "cursor"] as const;
  const query = new URLSearchParams(
    filters.flatMap((name) => (options[name] === undefined ? [] : [[name, options[name]]])),
  );
  const listing = await io.api.json<RunListing>("GET", `/v1/runs${query.size > 0 ? `?${query}` : ""}`);
  print(
    io,
    listing,
    () =>
      [
        ...listing.runs.map((run) =>
          [
            run.run_id,
            `${run.workflow.id}@${run.workflow.version}`.padEnd(24),
            run.status.padEnd(9),
            run.created_at,
            run.deleted_at ? `deleted ${run.deleted_at}` : (run.error?.code ?? ""),
          ]
            .join("  ")
            .trimEnd(),
        ),
        ...(listing.next_cursor ? [`more: --cursor ${listing.next_cursor}`] : []),
      ].join("\n") || "no runs",
  );
  return 0;
}

export async function showCommand(io: Io, runId: string, node: string | undefined): Promise<Exit> {
  if (node !== undefined) {
    const detail = await io.api.json("GET", `${runPath(runId)}/nodes/${encodeURIComponent(node)}`);
    io.out.write(`${JSON.stringify(detail, null, 2)}\n`);
    return 0;
  }
  const view = await io.api.json<RunView>("GET", runPath(runId));
  print(io, view, () => runText(view));
  return 0;
}

export async function tailCommand(io: Io, runId: string): Promise<Exit> {
  let outcome = "";
  for await (const entry of runEntries(io.api, runId)) {
    io.out.write(`${io.json ? JSON.stringify(entry) : entryLine(entry)}\n`);
    outcome = entry.kind === "attest" ? String(entry.body.outcome) : outcome;
  }
  return outcome === "completed" ? 0 : 1;
}

export async function gatesCommand(io: Io, runId: string): Promise<Exit> {
  const gates = await io.api.json<{ gates: GateView[] }>("GET", `${runPath(runId)}/gates`);
  print(
    io,
    gates,
    () =>
      gates.gates
        .map(
          (gate) =>
            `${gate.gate_id}  ${gate.kind.padEnd(8)} ${gate.status.padEnd(8)} ${gate.node}/${gate.step}  ${gate.prompt}`,
        )
        .join("\n") || "no gates",
  );
  return 0;
}

export async function answerCommand(
  io: Io,
  runId: string,
  gateId: string,
  options: { json: string; responder?: string },
): Promise<Exit> {
  const body = {
    response: readInput(options.json, "--json"),
    ...(options.responder ? { responder: options.responder } : {}),
  };
  const answered = await io.api.json("POST", `${runPath(runId)}/gates/${encodeURIComponent(gateId)}`, { body });
  print(io, answered, () => `${gateId}  answered`);
  return 0;
}

export async function controlCommand(
  io: Io,
  control: string,
  runId: string,
  reason: string | undefined,
): Promise<Exit> {
  const answer = await io.api.json<{ status: string }>("POST", `${runPath(runId)}/${control}`, {
    body: reason === undefined ? {} : { reason },
  });
  print(io, answer, () => `${runId}  ${answer.status}`);
  return 0;
}

/** `trellis delete <run_id>`: deletes a run that has ended, now (`DELETE /v1/runs/{run_id}`, role admin). */
export async function deleteCommand(io: Io, runId: string): Promise<Exit> {
  const answer = await io.api.json<{ ended: string; deleted_at: string; archived: boolean }>("DELETE", runPath(runId));
  const archived = answer.archived ? "; its journal is archived" : "";
  print(io, answer, () => `${runId}  deleted at ${answer.deleted_at} (it had ${answer.ended})${archived}`);
  return 0;
}

/**
 * `trellis erase <run> --reason text`: erases an ended run's data
 * (`POST /v1/runs/{id}/erase`, an admin's): prints how many journal entries
 * lost their values and how many blobs the run gave up.
 */
export async function eraseCommand(io: Io, runId: string, reason: string): Promise<Exit> {
  const answer = await io.api.json<{ erased?: { seqs: number[]; blobs: string[] } }>(
    "POST",
    `${runPath(runId)}/erase`,
    { body: { reason } },
  );
  const seqs = answer.erased?.seqs.length ?? 0;
  const blobs = answer.erased?.blobs.length ?? 0;
  print(io, answer, () => `${runId}  erased: the values of ${seqs} journal entries, ${blobs} blobs`);
  return 0;
}

export async function verifyCommand(io: Io, target: string, jwks: string | undefined): Promise<Exit> {
  const report = await verify(io.api, target, jwks);
  print(io, report, () => formatReport(report));
  return report.ok ? 0 : 1;
}

/** What `--data` and `--id` give an event or a signal. */
export interface EventOptions {
  data?: string;
  id?: string;
}

/**
 * `trellis events send <name>`: one event (`POST /v1/events`); `--data` is
 * JSON or a file holding it, `--id` makes a resend safe (the same id of the
 * same name is accepted once in 24 h).
 */
export function sendEventCommand(io: Io, name: string, options: EventOptions): Promise<Exit> {
  return postEvent(io, "/v1/events", name, options);
}

/**
 * `trellis signal <run_id> <name>`: one signal to one run
 * (`POST /v1/runs/{run_id}/signals`), taken by its waiting `event` step or
 * kept until one waits; `--data` and `--id` as for `events send` (the run
 * accepts the same id once).
 */
export function signalCommand(io: Io, runId: string, name: string, options: EventOptions): Promise<Exit> {
  return postEvent(io, `${runPath(runId)}/signals`, name, options);
}

/** Posts `{ name, data?, id? }` to `path` and prints each event's id and whether it was new. */
async function postEvent(io: Io, path: string, name: string, options: EventOptions): Promise<Exit> {
  const body = {
    name,
    ...(options.data === undefined ? {} : { data: readInput(options.data, "--data") }),
    ...(options.id === undefined ? {} : { id: options.id }),
  };
  const answer = await io.api.json<{ events: { event_id: string; duplicate: boolean }[] }>("POST", path, { body });
  print(io, answer, () =>
    answer.events.map((event) => `${event.event_id}  ${event.duplicate ? "duplicate" : "accepted"}`).join("\n"),
  );
  return 0;
}

export async function mcpToolsCommand(io: Io, server: string): Promise<Exit> {
  const listing = await io.api.json<{
    tools: { name: string; pin: string; description: string | null; allowed: boolean }[];
  }>("GET", `/v1/mcp_servers/${encodeURIComponent(server)}/tools`);
  print(io, listing, () =>
    listing.tools
      .map((tool) =>
        [
          tool.name.padEnd(28),
          tool.pin,
          tool.allowed ? "" : "(not in allowed_tools)",
          tool.description?.split("\n")[0] ?? "",
        ]
          .filter((part) => part !== "")
          .join("  "),
      )
      .join("\n"),
  );
  return 0;
}
