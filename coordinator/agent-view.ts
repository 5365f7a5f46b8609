import { openSealed } from "../lib/journal/seal.ts";
import { recordable } from "../lib/recordable.ts";
import { MAX_VIEW_TOOL_CALLS, type AgentView } from "../schemas/api.ts";
import { DEFAULT_LLM_MAX_TURNS } from "../schemas/actions.ts";
import { JsonValue, type Json } from "../schemas/common.ts";
import { JOURNAL_BODIES, parseJournalBody, type JournalBody } from "../schemas/journal-bodies.ts";
import type { JournalEntry } from "../schemas/journal.ts";
import { StepRecord } from "../schemas/payload.ts";
import type { ResolvedTask } from "../schemas/resolved.ts";
import { z } from "zod";

/**
 * The node view's `agent` of an invocation (docs/api.md, "GET
 * /v1/runs/{run_id}/nodes/{node}"): the loop of its `llm` step with tools,
 * read from the journal. Each model call that answered is a turn, read from
 * the step's records in the `task.*` entries that closed its dispatches (one
 * dispatch per turn, and its repairs); each tool call from its `tool_call.*`
 * entries. A dispatch that is not a continuation after tool calls starts the
 * loop over (a retry, a redrive, a `repeat` iteration), as the executor does.
 */

/** What the view needs of an agent step's action: its limits. */
export interface AgentLimits {
  budget?: { tokens?: number; cost_usd?: number };
  max_turns: number;
}

/** The agent steps of a node's task, by ref. */
export function agentStepsOf(task: ResolvedTask | undefined): Map<string, AgentLimits> {
  const steps = new Map<string, AgentLimits>();
  for (const step of task?.steps ?? []) {
    const action = step.action;
    if (action.kind === "llm" && action.implementation.tools !== undefined) {
      const { budget, max_turns } = action.implementation;
      steps.set(step.ref, {
        ...(budget === undefined ? {} : { budget }),
        max_turns: max_turns ?? DEFAULT_LLM_MAX_TURNS,
      });
    }
  }
  return steps;
}

type Turn = AgentView["turns"][number];
type ToolCall = AgentView["tool_calls"][number];

/** A tool call as the journal tells it, before its values are bounded. */
interface CallState extends Omit<ToolCall, "input" | "output" | "attempts"> {
  input: Json;
  output?: Json;
  /** Dispatches, and the action calls of the one that returned step records. */
  dispatches: number;
  recorded: number | null;
  dispatched_at: number | null;
}

interface Loop {
  step: string;
  turns: Turn[];
  calls: Map<string, CallState>;
}

/** The loops of one invocation's agent steps, as the journal is read in order. */
class LoopReader {
  private readonly loops = new Map<string, Loop>();
  private latest: Loop | undefined;
  /** Whether the dispatch in flight continues a loop after its tool calls. */
  private continues = false;

  constructor(private readonly steps: ReadonlyMap<string, AgentLimits>) {}

  read(entry: JournalEntry): void {
    if (entry.kind === "task.dispatched") {
      this.continues = entry.body.resume === "tools";
    } else if (entry.kind === "task.completed" || entry.kind === "task.failed" || entry.kind === "task.suspended") {
      this.readSteps(openSealed(entry.body)["steps"] as Json | undefined);
    } else if (isToolCallKind(entry.kind)) {
      this.readCall(entry.kind, entry);
    } else if (entry.kind === "approval.requested") {
      this.readApproval(entry);
    }
  }

  /** The loop the invocation ran last, with its limits. */
  async view(): Promise<AgentView | undefined> {
    const loop = this.latest;
    const limits = loop && this.steps.get(loop.step);
    if (loop === undefined || limits === undefined) {
      return undefined;
    }
    const calls = [...loop.calls.values()];
    return {
      step: loop.step,
      turns: loop.turns,
      tool_calls: await Promise.all(calls.slice(0, MAX_VIEW_TOOL_CALLS).map(toCallView)),
      tool_calls_total: calls.length,
      usage: usageOf(loop.turns),
      ...(limits.budget === undefined ? {} : { budget: limits.budget }),
      max_turns: limits.max_turns,
    };
  }

  private readSteps(steps: Json | undefined): void {
    const records = StepRecord.array().safeParse(steps ?? []);
    for (const record of records.success ? records.data : []) {
      if (!this.steps.has(record.step) || record.status === "skipped") {
        continue;
      }
      // A continuation's records start at the step that waited; an agent step after it starts its loop.
      const current = this.loops.get(record.step);
      const loop = this.continues && current !== undefined ? current : this.startLoop(record.step);
      this.continues = false;
      loop.turns.push(...turnsOf(record, loop.turns.length));
      this.latest = loop;
    }
  }

  private startLoop(step: string): Loop {
    const loop: Loop = { step, turns: [], calls: new Map() };
    this.loops.set(step, loop);
    return loop;
  }

  /** A high-risk tool's call waits for its approval gate until it is dispatched (or rejected: `tool_call.failed`). */
  private readApproval(entry: JournalEntry): void {
    const body = parseJournalBody("approval.requested", entry.body);
    const ref = body.success ? body.data.tool_call : undefined;
    const call =
      ref && body.success ? this.loops.get(body.data.step)?.calls.get(`${ref.turn}/${ref.index}`) : undefined;
    if (call !== undefined && body.success) {
      call.status = "approval";
      call.gate_id = body.data.gate_id;
    }
  }

  private readCall(kind: ToolCallKind, entry: JournalEntry): void {
    const place = CallPlace.safeParse(entry.body);
    const loop = place.success && place.data.step !== null ? this.loops.get(place.data.step) : undefined;
    if (!place.success || loop === undefined) {
      return;
    }
    const id = `${place.data.turn}/${place.data.index}`;
    if (kind === "tool_call.requested") {
      const body = parseJournalBody(kind, entry.body);
      if (body.success) {
        loop.calls.set(id, requested(body.data));
      }
      return;
    }
    const call = loop.calls.get(id);
    if (call !== undefined) {
      TOOL_CALL_ENTRIES[kind](call, entry.body, Date.parse(entry.at));
    }
  }
}

/** Where a `tool_call.*` entry's call is: its step, turn and place in the turn. */
const CallPlace = z.looseObject({ step: z.string().nullable(), turn: z.number().int(), index: z.number().int() });

/** A row of {@link TOOL_CALL_ENTRIES}: the entry's body parsed by its kind's schema, then applied. */
function onEntry<K extends ToolCallKind>(
  kind: K,
  apply: (call: CallState, body: JournalBody<K>, at: number) => void,
): (call: CallState, body: Record<string, unknown>, at: number) => void {
  return (call, body, at) => {
    const parsed = parseJournalBody(kind, body);
    if (parsed.success) {
      apply(call, parsed.data, at);
    }
  };
}

/**
 * What each `tool_call.*` entry does to its call; `requested` creates it. One
 * row per kind, so a kind added to the journal is a row added here.
 */
const TOOL_CALL_ENTRIES: Record<
  Exclude<ToolCallKind, "tool_call.requested">,
  (call: CallState, body: Record<string, unknown>, at: number) => void
> = {
  "tool_call.dispatched": onEntry("tool_call.dispatched", (call, _body, at) => {
    call.status = "running";
    call.dispatches += 1;
    call.dispatched_at = at;
  }),
  "tool_call.completed": onEntry("tool_call.completed", (call, body) => {
    call.status = "completed";
    call.output = body.output;
    call.duration_ms = body.duration_ms;
    call.recorded = actionCalls(body.steps);
  }),
  "tool_call.failed": onEntry("tool_call.failed", (call, body, at) => {
    call.status = "failed";
    call.error = { code: body.error.code, message: body.error.message };
    call.recorded = actionCalls(body.steps);
    if (call.dispatched_at !== null) {
      call.duration_ms = Math.max(0, at - call.dispatched_at);
    }
  }),
  "tool_call.cancelled": onEntry("tool_call.cancelled", (call, body) => {
    call.status = "cancelled";
    call.error = { code: "tool_call.cancelled", message: body.reason };
  }),
};

type ToolCallKind = Extract<keyof typeof JOURNAL_BODIES, `tool_call.${string}`>;

function isToolCallKind(kind: string): kind is ToolCallKind {
  return kind.startsWith("tool_call.") && Object.hasOwn(JOURNAL_BODIES, kind);
}

function requested(body: JournalBody<"tool_call.requested">): CallState {
  return {
    turn: body.turn,
    index: body.index,
    name: body.name,
    call: body.call,
    input: body.input,
    // A call the executor refused never runs: its error is its answer.
    status: body.error === undefined ? "requested" : "failed",
    ...(body.error === undefined ? {} : { error: body.error }),
    dispatches: 0,
    recorded: null,
    dispatched_at: null,
  };
}

/** How many times the tool's action was called in a dispatch that returned step records. */
function actionCalls(steps: readonly StepRecord[] | undefined): number | null {
  return steps === undefined ? null : steps.reduce((sum, step) => sum + step.attempts.length, 0);
}

async function toCallView(call: CallState): Promise<ToolCall> {
  const { dispatches, recorded, dispatched_at: _at, input, output, ...rest } = call;
  return {
    ...rest,
    input: await recordable(input),
    ...(output === undefined ? {} : { output: await recordable(output) }),
    attempts: recorded === null ? dispatches : dispatches - 1 + recorded,
  };
}

/** What a model call's record says of it (executor/actions/llm.ts notes these). */
const AnsweredCall = z.looseObject({
  provider: z.string(),
  model: z.string(),
  tokens: z.strictObject({ input: z.number().int().min(0), output: z.number().int().min(0) }),
  cost_usd: z.number().min(0),
  finish_reason: z.string(),
  answer: JsonValue.optional(),
});

/** The turns of one dispatch: each call of the step that answered, numbered on from `before`. */
function turnsOf(record: StepRecord, before: number): Turn[] {
  const turns: Turn[] = [];
  record.attempts.forEach((attempt, position) => {
    const answered = AnsweredCall.safeParse(attempt.call);
    if (!answered.success) {
      return;
    }
    const { provider, model, tokens, cost_usd, finish_reason, answer } = answered.data;
    const repair = record.attempts[position - 1]?.retry_reason === "repair";
    turns.push({
      turn: before + turns.length + 1,
      model,
      provider,
      tokens: { input: tokens.input, output: tokens.output },
      cost_usd,
      finish_reason,
      ...(repair ? { repair: true as const } : {}),
      ...(answer === undefined || answer === "" ? {} : { answer }),
    });
  });
  return turns;
}

function usageOf(turns: readonly Turn[]): AgentView["usage"] {
  const usage = { tokens: { input: 0, output: 0 }, cost_usd: 0 };
  for (const turn of turns) {
    usage.tokens.input += turn.tokens.input;
    usage.tokens.output += turn.tokens.output;
    // Rounded as the agent rounds its own sum, so the two agree.
    usage.cost_usd = Math.round((usage.cost_usd + turn.cost_usd) * 1e9) / 1e9;
  }
  return usage;
}

/**
 * The `agent` of each invocation of a node whose task has agent steps, by
 * invocation index, from the node's journal entries in order.
 */
export async function agentViews(
  nodeId: string,
  steps: ReadonlyMap<string, AgentLimits>,
  entries: readonly JournalEntry[],
): Promise<Map<number, AgentView>> {
  const views = new Map<number, AgentView>();
  if (steps.size === 0) {
    return views;
  }
  const readers = new Map<number, LoopReader>();
  for (const entry of entries) {
    if (entry.body.node !== nodeId) {
      continue;
    }
    const index = typeof entry.body.item === "number" ? entry.body.item : 0;
    const reader = readers.get(index) ?? new LoopReader(steps);
    readers.set(index, reader);
    reader.read(entry);
  }
  for (const [index, reader] of readers) {
    const view = await reader.view();
    if (view !== undefined) {
      views.set(index, view);
    }
  }
  return views;
}
