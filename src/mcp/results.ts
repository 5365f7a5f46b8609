import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { EngineError, ensureEngineError } from "../../lib/errors.ts";
import type { GateView, RunView } from "../../schemas/api.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import type { ApprovalLink, RunHandle } from "../../schemas/mcp.ts";
import { errorBody, statusOf } from "../errors.ts";
import { toStructured, type ToolSchema } from "./schema-map.ts";

/**
 * What the MCP tools answer (docs/mcp.md, "Results"), as plain functions of
 * the API's views: a run that ended, one still going (a handle, and the gates
 * that wait for input), an error of the API. Text content always carries the
 * JSON, for clients that show only text; `structuredContent` carries it too
 * unless the tool declares an `outputSchema` the answer does not match (MCP
 * lets only an error result leave it out then).
 */

/** The `_meta` key of every run tool's result: the run's handle. */
export const RUN_META_KEY = "trellis/run";

/** How a run tool answers: the tool's output schema (a workflow tool's), and where the console is. */
export interface RunAnswerContext {
  origin: string;
  /** The tool's output schema; undefined for a tool that declares none. */
  outputSchema: ToolSchema | undefined;
  /** Seconds the call waited, said in the still-going text. */
  waitedSeconds: number;
  /** Gates asked through elicitation during this call, still open. */
  asked: readonly string[];
  /** Approval links made for the caller, by gate id (src/mcp/links.ts). */
  links?: Readonly<Record<string, ApprovalLink>>;
}

/** The run's page in the web console. */
export function runUrl(origin: string, runId: string): string {
  return `${origin}/runs/${encodeURIComponent(runId)}`;
}

export function toHandle(view: Pick<RunView, "run_id" | "status">, origin: string): RunHandle {
  return { run_id: view.run_id, status: view.status, url: runUrl(origin, view.run_id) };
}

/** A run tool's answer for the run as it is now: its output, its error, or its handle. */
export function runResult(view: RunView, context: RunAnswerContext): CallToolResult {
  const handle = toHandle(view, context.origin);
  const meta = { [RUN_META_KEY]: handle };
  if (view.status === "completed") {
    const structured = toStructured(view.output ?? null, context.outputSchema);
    return { content: [text(structured)], structuredContent: structured, _meta: meta };
  }
  if (view.status === "failed" || view.status === "cancelled") {
    const report: JsonObject = { ...handle, error: view.error ?? null };
    const summary = view.error ? `${view.error.code}: ${view.error.message}` : view.status;
    return withReport(`Run ${view.run_id} ${view.status}: ${summary}`, report, context, meta, true);
  }
  const gates = view.gates.filter((gate) => gate.status === "open");
  const report: JsonObject = {
    ...handle,
    ...(gates.length > 0 ? { needs_input: gates.map((gate) => gateReport(gate, context)) } : {}),
    waiting_for: view.waiting_for as Json,
  };
  return withReport(stillGoing(view, gates, context), report, context, meta, false);
}

/**
 * A report as the answer: structured when the tool declares no output
 * schema; else an error result, since MCP requires the structured content of
 * a tool with one to match it, and a run that has not ended has no output.
 */
function withReport(
  sentence: string,
  report: JsonObject,
  context: RunAnswerContext,
  meta: JsonObject,
  failed: boolean,
): CallToolResult {
  const content = [{ type: "text" as const, text: sentence }, text(report)];
  if (context.outputSchema === undefined) {
    return { content, structuredContent: report, _meta: meta, ...(failed ? { isError: true } : {}) };
  }
  return { content, isError: true, _meta: meta };
}

function stillGoing(view: RunView, gates: GateView[], context: RunAnswerContext): string {
  const follow = `follow it with trellis_wait_run {"run_id":"${view.run_id}"}`;
  if (gates.length === 0) {
    return `Run ${view.run_id} has not ended after ${context.waitedSeconds} s (status ${view.status}): it has not failed; ${follow}.`;
  }
  const asked = gates.filter((gate) => context.asked.includes(gate.gate_id)).map((gate) => gate.gate_id);
  const waits = gates.map((gate) => `gate ${gate.gate_id}: ${gate.prompt}`).join("; ");
  return (
    `Run ${view.run_id} needs input (${waits}). Answer with trellis_answer_gate ` +
    `{"run_id","gate_id","response"} (response matching the gate's input_schema), then ${follow}.` +
    (asked.length > 0 ? ` The form already shown for ${asked.join(", ")} still answers it when submitted.` : "") +
    linkSentence(gates, context)
  );
}

/** What the text says of the approval links made for the caller: each URL, once. */
function linkSentence(gates: GateView[], context: RunAnswerContext): string {
  const links = gates.flatMap((gate) => {
    const link = context.links?.[gate.gate_id];
    return link?.url ? [`gate ${gate.gate_id}: ${link.url} (until ${link.expires_at})`] : [];
  });
  return links.length === 0
    ? ""
    : ` The person behind this client may answer in a browser instead: ${links.join("; ")}.`;
}

/** An open gate as a report shows it: what to answer, and how. */
export function gateReport(gate: GateView, context: Pick<RunAnswerContext, "asked" | "links">): JsonObject {
  const link = context.links?.[gate.gate_id];
  return {
    gate_id: gate.gate_id,
    kind: gate.kind,
    prompt: gate.prompt,
    input_schema: gate.input_schema,
    node: gate.node,
    step: gate.step,
    expires_at: gate.expires_at,
    ...(gate.approvers === undefined ? {} : { approvers: gate.approvers as Json }),
    answer_with: "trellis_answer_gate",
    ...(context.asked.includes(gate.gate_id) ? { elicited: true } : {}),
    ...(link === undefined ? {} : { approval_link: link }),
  };
}

/** An error of the API as a tool's answer: the API's error body, with its problems and their paths. */
export function errorResult(error: EngineError, declaresOutput: boolean): CallToolResult {
  const body = errorBody(error) as unknown as JsonObject;
  const problems = (error.details ?? []).map((detail) => `${detail.path || "(input)"}: ${detail.message}`);
  const sentence = [`${error.code}: ${error.message}`, ...problems].join("\n");
  return {
    content: [{ type: "text", text: sentence }, text(body)],
    ...(declaresOutput ? {} : { structuredContent: body }),
    isError: true,
  };
}

/**
 * Whatever a tool call threw, as its error result, as the API's one error
 * path shows it (src/errors.ts `onError`): a server fault is logged, and an
 * internal error's own message is not shown.
 */
export function toolError(thrown: unknown, tool: string, declaresOutput: boolean): CallToolResult {
  const error = ensureEngineError(thrown);
  if (statusOf(error.code) >= 500) {
    console.error(JSON.stringify({ msg: "mcp tool failed", tool, code: error.code, error: error.message }));
  }
  const shown = error.code === "internal.error" ? new EngineError("internal.error", "internal error") : error;
  return errorResult(shown, declaresOutput);
}

/** A value as the answer: structured, and as JSON text. */
export function valueResult(value: JsonObject): CallToolResult {
  return { content: [text(value)], structuredContent: value };
}

/** A run as `trellis_get_run` shows it: the run view without each node's invocations and steps. */
export function trimRun(view: RunView, origin: string): JsonObject {
  return {
    ...toHandle(view, origin),
    workflow: view.workflow,
    mode: view.mode,
    input: view.input,
    output: view.output,
    error: view.error as Json,
    created_at: view.created_at,
    updated_at: view.updated_at,
    nodes: Object.fromEntries(Object.entries(view.nodes).map(([id, node]) => [id, node.status])),
    open_gates: view.gates.filter((gate) => gate.status === "open").map((gate) => gateReport(gate, { asked: [] })),
    waiting_for: view.waiting_for as Json,
    children: view.children as Json,
    usage: view.usage,
    controls: view.controls,
  };
}

function text(value: JsonObject): { type: "text"; text: string } {
  return { type: "text", text: JSON.stringify(value) };
}
