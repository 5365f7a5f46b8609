import { readFileSync } from "node:fs";
import { extname } from "node:path";
import { parse } from "yaml";
import type { Json, PlanGraph, StartPlanResponse } from "../schemas/index.ts";
import { CliError } from "./api.ts";
import { awaitRun, readInput, type Exit, type Io } from "./commands.ts";

/** `trellis plan`'s options (docs/cli.md). */
export interface PlanOptions {
  tools?: string;
  mode?: string;
  approveSteps?: string;
  input?: string;
  idempotencyKey?: string;
  wait?: boolean;
  follow?: boolean;
}

/**
 * `trellis plan <file>`: runs an agent plan (`POST /v1/plans`, docs/plans.md).
 * The file is the plan itself, or a whole request body when it has a `plan`
 * key (then its `tools`, `input`, `mode`, … are used, and the flags given
 * replace them). A preview prints the compiled graph; a run prints its id, or
 * with `--wait` / `--follow` the run and its ToolResults once it ends.
 */
export async function planCommand(io: Io, file: string, options: PlanOptions): Promise<Exit> {
  const body = planRequest(readDocument(file), options, file);
  const started = await io.api.json<StartPlanResponse>("POST", "/v1/plans", { body });
  if (started.run_id === null) {
    io.out.write(`${io.json ? JSON.stringify(started, null, 2) : graphText(started.graph)}\n`);
    return 0;
  }
  if (!(options.wait || options.follow)) {
    io.out.write(`${io.json ? JSON.stringify(started, null, 2) : startedText(started.run_id, started)}\n`);
    return 0;
  }
  return awaitRun(io, started.run_id, options);
}

function readDocument(file: string): Record<string, Json> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    throw new CliError("cli.not_found", `${file}: no such file`);
  }
  let document: unknown;
  try {
    document = extname(file) === ".json" ? JSON.parse(text) : parse(text, { maxAliasCount: 100 });
  } catch (thrown) {
    throw new CliError("cli.invalid_plan", `${file}: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new CliError("cli.invalid_plan", `${file}: a plan is an object with "steps" (or a request with "plan")`);
  }
  return document as Record<string, Json>;
}

/** The request body: the file's request (or a request around the file's plan), with the flags applied. */
export function planRequest(document: Record<string, Json>, options: PlanOptions, file: string): Record<string, Json> {
  const request: Record<string, Json> = Object.hasOwn(document, "plan") ? { ...document } : { plan: document };
  if (options.tools !== undefined) {
    request.tools = list(options.tools);
  }
  if (options.approveSteps !== undefined) {
    request.approved_steps = list(options.approveSteps);
  }
  if (options.input !== undefined) {
    request.input = readInput(options.input) as Json;
  }
  if (options.mode !== undefined) {
    request.mode = options.mode;
  }
  if (options.idempotencyKey !== undefined) {
    request.idempotency_key = options.idempotencyKey;
  }
  if (!Object.hasOwn(request, "tools")) {
    throw new CliError(
      "cli.missing_tools",
      `${file} has no "tools": give the plan's allowlist with --tools a,b (every step's tool must be on it)`,
    );
  }
  return request;
}

const list = (text: string): string[] =>
  text
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");

function startedText(runId: string, started: StartPlanResponse): string {
  const waiting = started.graph.high_risk.filter((step) => !started.graph.approvals.approved_steps.includes(step));
  return [
    `${runId}  ${started.status}`,
    ...(waiting.length > 0 ? [`high-risk steps wait for approval: ${waiting.join(", ")}`] : []),
  ].join("\n");
}

/** A preview's compiled graph as a person reads it: layers, each step with what it waits for and reads. */
export function graphText(graph: PlanGraph): string {
  const steps = graph.steps.length;
  const lines = [`preview: ${graph.notation} plan, ${steps} step(s) in ${graph.layers.length} layer(s)`];
  graph.layers.forEach((layer, index) => lines.push(`  layer ${index + 1}: ${layer.join(", ")}`));
  for (const step of graph.steps) {
    const after = step.depends_on.length > 0 ? `  after ${step.depends_on.join(", ")}` : "";
    const over = step.expands_over === null ? "" : `  once per item of ${step.expands_over}`;
    lines.push(`  ${step.id}  ${step.tool}  risk ${step.risk}${after}${over}`);
    for (const [name, source] of Object.entries(step.args)) {
      lines.push(`      ${name} ← ${JSON.stringify(source)}`);
    }
  }
  const approved = graph.approvals.approved_steps;
  const waiting = graph.high_risk.filter((step) => !approved.includes(step));
  lines.push(`high-risk: ${graph.high_risk.length > 0 ? graph.high_risk.join(", ") : "none"}`);
  if (graph.high_risk.length > 0) {
    lines.push(`  approved ahead: ${approved.length > 0 ? approved.join(", ") : "none"}`);
    lines.push(`  will wait for approval: ${waiting.length > 0 ? waiting.join(", ") : "none"}`);
  }
  if (graph.inputs_gate) {
    lines.push("inputs: asked through an input gate before any step runs");
  }
  if (graph.fallback !== null) {
    lines.push(`fallback: ${graph.fallback}`);
  }
  const { maxParallelExecutions, toolTimeout, maxRetries, retryDelay, failFast } = graph.config;
  lines.push(
    `config: ${maxParallelExecutions} parallel, ${toolTimeout} ms per call, ${maxRetries} retries ` +
      `after ${retryDelay} ms, failFast ${failFast}`,
  );
  return lines.join("\n");
}
