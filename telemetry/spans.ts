import type { JournalEntry } from "../schemas/journal.ts";
import { parseJournalBody, type JournalBody, type JournalKind } from "../schemas/journal-bodies.ts";
import type { StepRecord } from "../schemas/payload.ts";
import type { OpenSpan, SpanFoldState } from "../schemas/telemetry.ts";
import { childSpanSymbol } from "./ids.ts";
import { stepSpans } from "./steps.ts";

/**
 * A run's journal as spans (docs/telemetry.md, "What a trace holds"): a
 * pure fold over the entries, in order. A span is emitted when the entry
 * that closes it is folded (OTLP sends only finished spans), with the times
 * of the entries that opened and closed it; what is still open is kept in
 * {@link SpanFoldState} for the next export. Spans are named here by
 * symbolic ids (`run`, `seq/<n>`, `seq/<n>/step/<i>`, `child/<run id>`),
 * which telemetry/ids.ts turns into span ids.
 */

export type AttributeValue = string | number | boolean | string[];
export type Attributes = Record<string, AttributeValue>;

/** A finished span, before its ids are derived and it is encoded (telemetry/otlp.ts). */
export interface SpanDraft {
  /** Symbolic id; the parent's, or null for the run span (whose parent is the `traceparent`'s span, if any). */
  id: string;
  parent: string | null;
  name: string;
  kind: "internal" | "client";
  /** ms since the epoch. */
  start: number;
  end: number;
  attributes: Attributes;
  events: { name: string; time: number; attributes: Attributes }[];
  status: { code: "unset" | "ok" | "error"; message?: string };
}

/** The symbolic id of the run span. */
export const RUN_SPAN = "run";

/** A fold with nothing folded yet. */
export function emptyFoldState(): SpanFoldState {
  return { created: null, attested: false, open: {}, suspended: {} };
}

/** Folds `entries` (in seq order, after those `state` has seen) into the spans they close, and the state after. */
export function foldEntries(
  state: SpanFoldState,
  entries: readonly JournalEntry[],
): { state: SpanFoldState; spans: SpanDraft[] } {
  const fold = new SpanFold(structuredClone(state), entries[0]?.run_id ?? "");
  for (const entry of entries) {
    HANDLERS[entry.kind]?.(fold, entry);
  }
  return { state: fold.state, spans: fold.spans };
}

/** The fold's working state: what is open, and the spans closed so far. */
class SpanFold {
  readonly spans: SpanDraft[] = [];

  constructor(
    readonly state: SpanFoldState,
    private readonly runId: string,
  ) {}

  /** Attributes every span of the run carries. */
  base(): Attributes {
    const created = this.state.created;
    const workflow: Attributes = created
      ? { "trellis.workflow.id": created.workflow.id, "trellis.workflow.version": created.workflow.version }
      : {};
    return { "trellis.run.id": this.runId, ...workflow };
  }

  open(key: string, span: OpenSpan): void {
    this.state.open[key] = span;
  }

  /** Closes the span open under `key` at `at` (an ISO time); nothing when none is open. */
  close(key: string, at: string, more: Partial<Pick<SpanDraft, "attributes" | "status">> = {}): OpenSpan | null {
    const open = this.state.open[key];
    if (open === undefined) {
      return null;
    }
    delete this.state.open[key];
    this.spans.push({
      id: open.id,
      parent: open.parent,
      name: open.name,
      kind: "internal",
      start: Date.parse(open.at),
      end: Date.parse(at),
      attributes: { ...this.base(), ...open.attributes, ...more.attributes },
      events: [],
      status: more.status ?? { code: "unset" },
    });
    return open;
  }

  /** The span a wait of `node`/`item` hangs under: the step its task waits at, else the run. */
  waitParent(node: string, item: number | null, step: string | null): string {
    return step === null ? RUN_SPAN : (this.state.suspended[`${node}/${item ?? "-"}`] ?? RUN_SPAN);
  }

  addSteps(records: readonly StepRecord[] | undefined, parent: OpenSpan, prefix: string, end: number, ms: number) {
    const start = Math.max(Date.parse(parent.at), end - ms);
    // Steps carry their dispatch's trellis.* attributes (node, item, attempt), not its conventions.
    const attributes = Object.fromEntries(
      Object.entries(parent.attributes).filter(([name]) => name.startsWith("trellis.")),
    );
    const spans = stepSpans(records ?? [], { parent: parent.id, prefix, start, end, attributes });
    this.spans.push(...spans.map((span) => ({ ...span, attributes: { ...this.base(), ...span.attributes } })));
    return spans;
  }
}

type Handler = (fold: SpanFold, entry: JournalEntry) => void;
type Typed<K extends JournalKind> = { seq: number; at: string; body: JournalBody<K> };

/** A handler of one kind, given its body parsed; an entry whose body does not parse is left out. */
function on<K extends JournalKind>(kind: K, handle: (fold: SpanFold, entry: Typed<K>) => void): Handler {
  return (fold, entry) => {
    const body = parseJournalBody(kind, entry.body);
    if (body.success) {
      handle(fold, { seq: entry.seq, at: entry.at, body: body.data });
    }
  };
}

const item = (value: number | null): Attributes => (value === null ? {} : { "trellis.item": value });
const failed = (error: { code: string; message: string }) => ({
  attributes: { "trellis.error.code": error.code, "error.type": error.code },
  status: { code: "error" as const, message: error.message },
});

const place = (node: string, nodeItem: number | null, step: string | null): Attributes => ({
  "trellis.node": node,
  ...item(nodeItem),
  ...(step === null ? {} : { "trellis.step": step }),
});
const suspendedKey = (node: string, nodeItem: number | null) => `${node}/${nodeItem ?? "-"}`;
const durationOf = (records: readonly StepRecord[] | undefined) =>
  (records ?? []).reduce((sum, record) => sum + record.duration_ms, 0);

/** The run span, from `run.created` to its first attestation; a redrive or a compensation is a section under it. */
const RUN_HANDLERS = {
  "run.created": on("run.created", (fold, { at, body }) => {
    const parentRun = body.trigger?.kind === "parent" ? body.trigger.run_id : null;
    fold.state.created = {
      at,
      workflow: body.workflow,
      traceparent: body.traceparent ?? null,
      parent_run_id: parentRun,
    };
    fold.open("run", {
      id: RUN_SPAN,
      parent: null,
      at,
      name: `run ${body.workflow.id}`,
      attributes: {
        "trellis.run.mode": body.mode,
        "trellis.run.trigger": body.trigger?.kind ?? (parentRun === null ? "api" : "parent"),
        ...(parentRun === null ? {} : { "trellis.parent_run.id": parentRun }),
      },
    });
  }),
  "attest": on("attest", (fold, { at, body }) => {
    const status: SpanDraft["status"] =
      body.outcome === "completed"
        ? { code: "ok" }
        : body.outcome === "failed"
          ? { code: "error", message: body.error?.message ?? body.reason }
          : { code: "unset" };
    const attributes: Attributes = {
      "trellis.run.outcome": body.outcome,
      ...(body.error ? { "trellis.error.code": body.error.code, "error.type": body.error.code } : {}),
    };
    if (fold.close("run", at, { attributes, status }) === null) {
      fold.close("section", at, { attributes, status });
    }
    fold.state.attested = true;
  }),
  "run.redriven": on("run.redriven", (fold, { seq, at, body }) => {
    const attributes = { "trellis.redrive": body.redrive };
    fold.open("section", { id: `seq/${seq}`, parent: RUN_SPAN, at, name: `redrive ${body.redrive}`, attributes });
  }),
  "compensation.started": on("compensation.started", (fold, { seq, at, body }) => {
    const attributes = { "trellis.compensation.trigger": body.trigger };
    fold.open("section", { id: `seq/${seq}`, parent: RUN_SPAN, at, name: "compensation", attributes });
  }),
  "run.limit_waiting": on("run.limit_waiting", (fold, { seq, at, body }) => {
    const attributes = { "trellis.limit.id": body.limit.id, "trellis.limit.key": body.limit_key };
    const span = { id: `seq/${seq}`, parent: RUN_SPAN, at, name: `limit ${body.limit.id}`, attributes };
    fold.open(`runlimit/${body.limit.id}`, span);
  }),
  "run.limit_granted": on("run.limit_granted", (fold, { at, body }) => {
    fold.close(`runlimit/${body.limit.id}`, at, { attributes: { "trellis.limit.waited_ms": body.waited_ms } });
  }),
};

/** One span per dispatch of a node's task (`task.dispatched` → its result), the step spans under it. */
const TASK_HANDLERS = {
  "task.dispatched": on("task.dispatched", (fold, { seq, at, body }) => {
    fold.open(`task/${body.token}`, {
      id: `seq/${seq}`,
      parent: RUN_SPAN,
      at,
      name: `node ${body.node}`,
      attributes: {
        ...place(body.node, body.item, null),
        "trellis.attempt": body.attempt,
        "trellis.task.id": body.task.id,
        "trellis.task.version": body.task.version,
        ...(body.resume === undefined ? {} : { "trellis.resume": body.resume }),
      },
    });
  }),
  "task.completed": on("task.completed", (fold, { seq, at, body }) => {
    const open = body.token === null ? null : fold.close(`task/${body.token}`, at, { status: { code: "ok" } });
    delete fold.state.suspended[suspendedKey(body.node, body.item)];
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), body.duration_ms);
    }
  }),
  "task.failed": on("task.failed", (fold, { seq, at, body }) => {
    const open = body.token === null ? null : fold.close(`task/${body.token}`, at, failed(body.error));
    delete fold.state.suspended[suspendedKey(body.node, body.item)];
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), durationOf(body.steps));
    }
  }),
  "task.suspended": on("task.suspended", (fold, { seq, at, body }) => {
    const open = fold.close(`task/${body.token}`, at, { attributes: { "trellis.task.outcome": "suspended" } });
    if (open) {
      const steps = fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), durationOf(body.steps));
      fold.state.suspended[suspendedKey(body.node, body.item)] = steps.at(-1)?.id ?? open.id;
    }
  }),
  "task.lost": on("task.lost", (fold, { at, body }) => {
    fold.close(`task/${body.token}`, at, failed({ code: "task.lost", message: "the dispatch was lost" }));
  }),
};

/** Opens a wait's span under the step that waits (or the run, for a sub-workflow node's child). */
function openWait(
  fold: SpanFold,
  key: string,
  entry: { seq: number; at: string; body: { node: string; item: number | null; step: string | null } },
  name: string,
  attributes: Attributes = {},
  id = `seq/${entry.seq}`,
): void {
  const { node, item: nodeItem, step } = entry.body;
  const parent = fold.waitParent(node, nodeItem, step);
  fold.open(key, { id, parent, at: entry.at, name, attributes: { ...place(node, nodeItem, step), ...attributes } });
}

const outcome = (value: string, status: SpanDraft["status"] = { code: "unset" }) => ({
  attributes: { "trellis.wait.outcome": value },
  status,
});
const OK = { code: "ok" } as const;

/** Gates, approvals, timers, event waits, limit waits and child runs: a span each, from its opening to its end. */
const WAIT_HANDLERS = {
  "gate.opened": on("gate.opened", (fold, entry) =>
    openWait(fold, `gate/${entry.body.gate_id}`, entry, `gate ${entry.body.step}`, {
      "trellis.gate.id": entry.body.gate_id,
    }),
  ),
  "gate.answered": on("gate.answered", (fold, { at, body }) => {
    fold.close(`gate/${body.gate_id}`, at, outcome("answered", OK));
  }),
  "gate.expired": on("gate.expired", (fold, { at, body }) => {
    fold.close(`gate/${body.gate_id}`, at, outcome("expired"));
  }),
  "approval.requested": on("approval.requested", (fold, entry) =>
    openWait(fold, `gate/${entry.body.gate_id}`, entry, `approval ${entry.body.step}`, {
      "trellis.gate.id": entry.body.gate_id,
    }),
  ),
  "approval.granted": on("approval.granted", (fold, { at, body }) => {
    fold.close(`gate/${body.gate_id}`, at, outcome("granted", OK));
  }),
  "approval.rejected": on("approval.rejected", (fold, { at, body }) => {
    fold.close(`gate/${body.gate_id}`, at, outcome("rejected"));
  }),
  "timer.started": on("timer.started", (fold, entry) =>
    openWait(fold, `wait/${entry.body.key}`, entry, `sleep ${entry.body.step ?? entry.body.node}`),
  ),
  "timer.fired": on("timer.fired", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("fired", OK));
  }),
  "timer.cancelled": on("timer.cancelled", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("cancelled"));
  }),
  "event.waiting": on("event.waiting", (fold, entry) =>
    openWait(fold, `wait/${entry.body.key}`, entry, `event ${entry.body.names.join(",")}`),
  ),
  "event.matched": on("event.matched", (fold, { at, body }) => {
    const matched = outcome("matched", OK);
    fold.close(`wait/${body.key}`, at, {
      ...matched,
      attributes: { ...matched.attributes, "trellis.event.name": body.name },
    });
  }),
  "event.timeout": on("event.timeout", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("timeout"));
  }),
  "event.cancelled": on("event.cancelled", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("cancelled"));
  }),
  "limit.waiting": on("limit.waiting", (fold, entry) =>
    openWait(fold, `wait/${entry.body.key}`, entry, `limit ${entry.body.limit.id}`, {
      "trellis.limit.id": entry.body.limit.id,
      "trellis.limit.key": entry.body.limit_key,
    }),
  ),
  "limit.granted": on("limit.granted", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("granted", OK));
  }),
  "limit.withdrawn": on("limit.withdrawn", (fold, { at, body }) => {
    fold.close(`wait/${body.key}`, at, outcome("withdrawn"));
  }),
  "child.started": on("child.started", (fold, entry) => {
    const id = childSpanSymbol(entry.body.child_run_id);
    const attributes = { "trellis.child_run.id": entry.body.child_run_id };
    openWait(fold, `child/${entry.body.child_run_id}`, entry, `workflow ${entry.body.workflow}`, attributes, id);
  }),
  "child.finished": on("child.finished", (fold, { at, body }) => {
    if (body.child_run_id !== null) {
      const status =
        body.status === "completed" ? OK : body.status === "failed" ? { code: "error" as const } : undefined;
      fold.close(`child/${body.child_run_id}`, at, outcome(body.status, status));
    }
  }),
};

/** An agent's tool calls: `execute_tool` spans under the llm step whose turn asked for them. */
const TOOL_HANDLERS = {
  "tool_call.requested": on("tool_call.requested", (fold, entry) => {
    const { body } = entry;
    const key = `tool/${body.key}/${body.turn}/${body.index}`;
    openWait(fold, key, entry, `execute_tool ${body.name}`, {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": body.name,
      "gen_ai.tool.call.id": body.call,
      "trellis.tool_call.turn": body.turn,
      "trellis.tool_call.index": body.index,
    });
    if (body.error) {
      fold.close(key, entry.at, failed(body.error));
    }
  }),
  "tool_call.completed": on("tool_call.completed", (fold, { seq, at, body }) => {
    const open = fold.close(`tool/${body.key}/${body.turn}/${body.index}`, at, { status: OK });
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), body.duration_ms);
    }
  }),
  "tool_call.failed": on("tool_call.failed", (fold, { seq, at, body }) => {
    const open = fold.close(`tool/${body.key}/${body.turn}/${body.index}`, at, failed(body.error));
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), durationOf(body.steps));
    }
  }),
  "tool_call.cancelled": on("tool_call.cancelled", (fold, { at, body }) => {
    fold.close(`tool/${body.key}/${body.turn}/${body.index}`, at, outcome("cancelled"));
  }),
};

/** The undos of a compensation: a span per attempt, under the compensation's section. */
const UNDO_HANDLERS = {
  "undo.dispatched": on("undo.dispatched", (fold, { seq, at, body }) => {
    fold.open(`undo/${body.token}`, {
      id: `seq/${seq}`,
      parent: fold.state.open.section?.id ?? RUN_SPAN,
      at,
      name: `undo ${body.step}`,
      attributes: {
        ...place(body.node, body.item, body.step),
        "trellis.attempt": body.attempt,
        "trellis.action": body.action,
      },
    });
  }),
  "undo.completed": on("undo.completed", (fold, { seq, at, body }) => {
    const open = fold.close(`undo/${body.token}`, at, { status: OK });
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), body.duration_ms);
    }
  }),
  "undo.failed": on("undo.failed", (fold, { seq, at, body }) => {
    const open = body.token === null ? null : fold.close(`undo/${body.token}`, at, failed(body.error));
    if (open) {
      fold.addSteps(body.steps, open, `seq/${seq}`, Date.parse(at), durationOf(body.steps));
    }
  }),
};

/** The kinds that open or close a span; every other kind (`run.status`, `node.*`, …) adds none. */
const HANDLERS: Partial<Record<string, Handler>> = {
  ...RUN_HANDLERS,
  ...TASK_HANDLERS,
  ...WAIT_HANDLERS,
  ...TOOL_HANDLERS,
  ...UNDO_HANDLERS,
};
