/**
 * One line per journal entry for the run page's timeline: the node and step
 * it concerns (from its body, when it has them), a short summary, written
 * per kind (docs/journal.md#entry-kinds), and who caused it when the body
 * carries `by` (docs/journal.md#who-caused-an-entry). A kind without a row
 * here is summarized from its body's first fields.
 */
import { causedBy } from "../../lib/journal/by.ts";
import { keyText } from "../../lib/limit-text.ts";

export interface EntryLine {
  node: string | null;
  step: string | null;
  summary: string;
  /** Who caused the entry, in words (`token "ci" (tok_…)`); only when its body carries `by`. */
  by?: string;
}

type Body = Record<string, unknown>;

function text(value: unknown): string {
  if (value === null || value === undefined) {
    return "–";
  }
  return typeof value === "string" ? value : JSON.stringify(value);
}

function errorText(value: unknown): string {
  if (typeof value === "object" && value !== null && "code" in value && "message" in value) {
    return `${text(value.code)}: ${text(value.message)}`;
  }
  return text(value);
}

function itemText(body: Body): string {
  return typeof body["item"] === "number" ? ` item ${body["item"]}` : "";
}

/** `item 3 ` before a phrase about one item, nothing outside a foreach. */
function itemPrefix(body: Body): string {
  return typeof body["item"] === "number" ? `item ${body["item"]} ` : "";
}

const SUMMARIES: Record<string, (body: Body) => string> = {
  "run.created": (b) => `${text(b["mode"])} run of ${workflowText(b["workflow"])}`,
  "run.status": (b) => `${text(b["from"])} → ${text(b["to"])}: ${text(b["reason"])}`,
  "run.redriven": (b) => `redrive ${text(b["redrive"])}: ${text(b["nodes"])}`,
  "node.started": (b) =>
    `iteration ${text(b["iteration"])}, ${text(b["invocations"])} invocation(s)` +
    (Array.isArray(b["skipped"]) && b["skipped"].length > 0 ? `, ${b["skipped"].length} skipped` : ""),
  "node.completed": (b) => `${text(b["invocations"])} invocation(s), ${text(b["iterations"])} iteration(s)`,
  "node.failed": (b) => `${errorText(b["error"])} (on_failure ${text(b["on_failure"])})`,
  "node.skipped": (b) => text(b["reason"]),
  "node.cancelled": (b) => text(b["reason"]),
  "node.repeat": (b) => `iteration ${text(b["iteration"])} done; until ${text(b["until"])} is false`,
  "task.dispatched": (b) =>
    `attempt ${text(b["attempt"])}${itemText(b)}` + (b["resume"] === undefined ? "" : `, resumed ${text(b["resume"])}`),
  "task.completed": (b) => `attempt ${text(b["attempt"])}${itemText(b)} in ${text(b["duration_ms"])} ms`,
  "task.failed": (b) => `attempt ${text(b["attempt"])}${itemText(b)}: ${errorText(b["error"])}`,
  "task.suspended": (b) => `attempt ${text(b["attempt"])}${itemText(b)} waits at ${text(b["step"])}`,
  "task.timeout": (b) => `attempt ${text(b["attempt"])}${itemText(b)} timed out`,
  "task.lost": (b) => `attempt ${text(b["attempt"])}${itemText(b)} lost; dispatched again`,
  "task.retry_scheduled": (b) => `attempt ${text(b["attempt"])}${itemText(b)} due at ${text(b["at"])}`,
  "task.result_ignored": (b) => `${b["success"] === true ? "success" : "failure"} ignored: ${text(b["reason"])}`,
  "gate.opened": (b) => `${text(b["gate_id"])} opened` + (b["expires_at"] ? `, expires ${text(b["expires_at"])}` : ""),
  "gate.answered": (b) => `${text(b["gate_id"])} answered${noteText(b)}: ${text(b["response"])}`,
  "gate.link_created": (b) =>
    `${text(b["gate_id"])}: approval link ${text(b["link_id"])} for ${text(b["approver"])}, expires ${text(b["expires_at"])}`,
  "gate.expired": (b) => `${text(b["gate_id"])} expired: ${text(b["reason"] ?? b["on_timeout"])}`,
  "approval.requested": (b) => `${text(b["gate_id"])}: approve ${actionText(b["action"])}?`,
  "approval.granted": (b) => `${text(b["gate_id"])} granted${noteText(b)}`,
  "approval.rejected": (b) => `${text(b["gate_id"])} rejected${noteText(b)}`,
  "timer.started": (b) => `${itemPrefix(b)}sleeps until ${text(b["until"])}`,
  "timer.fired": (b) => `${itemPrefix(b)}woke after ${text(b["slept_ms"])} ms`,
  "timer.cancelled": (b) => `${itemPrefix(b)}sleep cancelled: ${text(b["reason"])}`,
  "event.waiting": (b) =>
    `${itemPrefix(b)}waits for ${namesText(b["names"])}` +
    (b["match"] === undefined ? "" : ` where ${text(b["match"])}`) +
    (b["expires_at"] ? ` until ${text(b["expires_at"])}` : "") +
    (typeof b["lookback_ms"] === "number" && b["lookback_ms"] > 0 ? `, looking back ${b["lookback_ms"]} ms` : ""),
  "event.matched": (b) => `${itemPrefix(b)}took ${text(b["source"])} ${text(b["name"])} (${text(b["event_id"])})`,
  "event.declined": (b) =>
    `${itemPrefix(b)}declined ${text(b["name"])} (${text(b["event_id"])}): its match does not take it; still waiting`,
  "event.timeout": (b) =>
    `${itemPrefix(b)}timed out waiting; ` + (b["on_timeout"] === "default" ? "goes on with the default" : "fails"),
  "event.cancelled": (b) => `${itemPrefix(b)}wait cancelled: ${text(b["reason"])}`,
  "limit.waiting": (b) => `${itemPrefix(b)}waits for room in ${limitText(b)}`,
  "limit.granted": (b) => `${itemPrefix(b)}served by ${limitText(b)}, after ${text(b["waited_ms"])} ms`,
  "limit.withdrawn": (b) => `${itemPrefix(b)}stopped waiting for ${limitText(b)}: ${text(b["reason"])}`,
  "run.limit_waiting": (b) => `queued for ${limitText(b)}, at priority ${text(b["priority"])}`,
  "run.limit_granted": (b) => `holds ${limitText(b)}, after ${text(b["waited_ms"])} ms`,
  "signal.received": (b) => `signal ${text(b["name"])} (${text(b["event_id"])}) received`,
  "child.started": (b) => `child ${text(b["child_run_id"])} (${text(b["workflow"])})`,
  "child.finished": (b) =>
    `child ${text(b["child_run_id"])} ${text(b["status"])}` + (b["error"] ? `: ${errorText(b["error"])}` : ""),
  "child.cancel_requested": (b) => `cancel child ${text(b["child_run_id"] ?? b["key"])}`,
  "compensation.started": (b) =>
    `${text(b["trigger"])}: ${Array.isArray(b["pending"]) ? b["pending"].length : "?"} undo(s) to run`,
  "undo.dispatched": (b) => `undo ${text(b["undo"])}, attempt ${text(b["attempt"])}: ${text(b["action"])}`,
  "undo.completed": (b) => `undo ${text(b["undo"])}, attempt ${text(b["attempt"])} in ${text(b["duration_ms"])} ms`,
  "undo.failed": (b) => `undo ${text(b["undo"])}, attempt ${text(b["attempt"])}: ${errorText(b["error"])}`,
  "compensation.finished": (b) => `${text(b["status"])}: ${text(b["undone"])} of ${text(b["undos"])} undone`,
  "attest": (b) => `${text(b["outcome"])}: ${text(b["reason"])} (cites ${text(b["cited"])})`,
  "erased": (b) =>
    `${text(b["reason"])} (the values of ${Array.isArray(b["seqs"]) ? b["seqs"].length : "?"} entries, ` +
    `${Array.isArray(b["blobs"]) ? b["blobs"].length : "?"} blobs)`,
};

/**
 * The `responder` sent with an answer: the answerer's own words, not who
 * they are (that is `by`, which the engine authenticated).
 */
function noteText(body: Body): string {
  const responder = body["responder"];
  return typeof responder === "string" && responder !== "" ? ` (responder's note: ${responder})` : "";
}

function workflowText(value: unknown): string {
  if (typeof value === "object" && value !== null && "id" in value && "version" in value) {
    return `${text(value.id)}@${text(value.version)}`;
  }
  return text(value);
}

/** The limit and key of a `limit.*` or `run.limit_*` entry: `limit api-quota@2, key "acme"`. */
function limitText(body: Body): string {
  const key = body["limit_key"];
  return `limit ${workflowText(body["limit"])}, key ${typeof key === "string" ? keyText(key) : text(key)}`;
}

/** An event wait's names, `a or b`. */
function namesText(value: unknown): string {
  return Array.isArray(value) ? value.map(text).join(" or ") : text(value);
}

function actionText(value: unknown): string {
  if (typeof value === "object" && value !== null && "id" in value && "kind" in value) {
    return `${text(value.kind)} ${workflowText(value)}`;
  }
  return text(value);
}

const MAX_SUMMARY_CHARS = 160;

/** The timeline line of an entry of `kind` with `body`. */
export function summarizeEntry(kind: string, body: Body): EntryLine {
  const summarize = SUMMARIES[kind];
  const summary = summarize === undefined ? JSON.stringify(body) : summarize(body);
  const by = causedBy(body);
  return {
    node: typeof body["node"] === "string" ? body["node"] : null,
    step: typeof body["step"] === "string" ? body["step"] : null,
    summary: summary.length > MAX_SUMMARY_CHARS ? `${summary.slice(0, MAX_SUMMARY_CHARS - 1)}…` : summary,
    ...(by === null ? {} : { by }),
  };
}

/** The child runs each node started, from its `child.started` entries, in journal order. */
export function childrenByNode(entries: readonly { kind: string; body: Body }[]): Map<string, string[]> {
  const children = new Map<string, string[]>();
  for (const entry of entries) {
    const node = entry.body["node"];
    const child = entry.body["child_run_id"];
    if (entry.kind === "child.started" && typeof node === "string" && typeof child === "string") {
      children.set(node, [...(children.get(node) ?? []), child]);
    }
  }
  return children;
}

/** Why the run was cancelled: the reason of its `run.status` entry to `cancelled` (null when it was not). */
export function cancelReasonOf(entries: readonly { kind: string; body: Body }[]): string | null {
  const cancelled = entries.findLast((entry) => entry.kind === "run.status" && entry.body["to"] === "cancelled");
  return cancelled === undefined ? null : text(cancelled.body["reason"]);
}
