import { z } from "zod";
import type { CallAttempt, StepRecord } from "../schemas/payload.ts";
import type { Attributes, SpanDraft } from "./spans.ts";

/**
 * The spans of a dispatch's step records (docs/journal.md, "Step records";
 * docs/telemetry.md, "Steps"): one span per step, its calls as `attempt`
 * events, and its kind's conventions: GenAI for `llm` (`chat <model>`), HTTP
 * client for `http`, `execute_tool` for `mcp` and `tool`. Everything read
 * here passed the executor's secret scrubbing; an http call's URL is
 * recorded without its query or credentials. Prompts, answers, arguments and
 * results are not exported: a step record keeps them, a trace does not.
 */

/** What an llm call records (executor/actions/llm.ts): only the fields a span carries are read. */
const LlmCall = z.object({
  provider: z.string().optional(),
  model: z.string().optional(),
  tokens: z.object({ input: z.number(), output: z.number() }).optional(),
  finish_reason: z.string().optional(),
});
const HttpCall = z.object({ method: z.string().optional(), url: z.string().optional(), status: z.number().optional() });
const ToolCall = z.object({ tool: z.string().optional(), server: z.string().optional() });

/** Where a dispatch's steps go: their parent span, the id prefix, and the time the executor ran them in. */
export interface StepPlacement {
  /** Symbolic id of the span the steps hang under, and the prefix of theirs (`<prefix>/step/<i>`). */
  parent: string;
  prefix: string;
  /** When the executor started the dispatch's first step, and when the result was journaled (ms). */
  start: number;
  end: number;
  /** Attributes every step span carries (run, node, item, attempt). */
  attributes: Attributes;
}

/**
 * The spans of `records`, laid end to end from `placement.start`: a record
 * has durations, not times, so each step starts where the one before it ended
 * (exact in length, placed to the millisecond).
 */
export function stepSpans(records: readonly StepRecord[], placement: StepPlacement): SpanDraft[] {
  let cursor = placement.start;
  return records.map((record, index) => {
    const start = Math.min(cursor, placement.end);
    const end = Math.min(start + record.duration_ms, placement.end);
    cursor = end;
    const kind = record.action.split(" ")[0] ?? "";
    const call = KIND_CONVENTIONS[kind]?.(record.attempts) ?? { name: `${kind} ${record.step}`, attributes: {} };
    return {
      id: `${placement.prefix}/step/${index}`,
      parent: placement.parent,
      name: call.name,
      kind: call.client === true ? "client" : "internal",
      start,
      end,
      attributes: { ...placement.attributes, ...stepAttributes(record), ...call.attributes },
      events: attemptEvents(record.attempts, start),
      status: stepStatus(record),
    } satisfies SpanDraft;
  });
}

function stepAttributes(record: StepRecord): Attributes {
  return {
    "trellis.step": record.step,
    "trellis.step.status": record.status,
    "trellis.action": record.action,
    "trellis.step.attempts": record.attempts.length,
    ...(record.error ? { "trellis.error.code": record.error.code, "error.type": record.error.code } : {}),
  };
}

function stepStatus(record: StepRecord): SpanDraft["status"] {
  if (record.status === "failed" || record.status === "continued") {
    return { code: "error", message: record.error?.message ?? record.status };
  }
  return { code: record.status === "completed" ? "ok" : "unset" };
}

/** One `attempt` event per call, at the time it began (after the waits of the attempts before it). */
function attemptEvents(attempts: readonly CallAttempt[], start: number): SpanDraft["events"] {
  let cursor = start;
  return attempts.map((attempt) => {
    const time = cursor;
    cursor += attempt.duration_ms + (attempt.retry_in_ms ?? 0);
    const http = HttpCall.safeParse(attempt.call ?? {});
    const llm = LlmCall.safeParse(attempt.call ?? {});
    return {
      name: "attempt",
      time,
      attributes: {
        "trellis.attempt": attempt.attempt,
        "trellis.duration_ms": attempt.duration_ms,
        ...(attempt.error ? { "trellis.error.code": attempt.error.code, "error.type": attempt.error.code } : {}),
        ...(attempt.retry_in_ms === undefined ? {} : { "trellis.retry_in_ms": attempt.retry_in_ms }),
        ...(attempt.retry_reason === undefined ? {} : { "trellis.retry_reason": attempt.retry_reason }),
        ...(http.success && http.data.status !== undefined ? { "http.response.status_code": http.data.status } : {}),
        ...(llm.success && llm.data.model !== undefined ? { "gen_ai.request.model": llm.data.model } : {}),
      },
    };
  });
}

interface Convention {
  name: string;
  client?: boolean;
  attributes: Attributes;
}

/** How a step of each action kind is named and described, from its calls; other kinds are `<kind> <step>`. */
const KIND_CONVENTIONS: Partial<Record<string, (attempts: readonly CallAttempt[]) => Convention>> = {
  llm: llmConvention,
  http: httpConvention,
  mcp: toolConvention,
  tool: toolConvention,
};

/** The GenAI conventions: the model of the last call (a fallback's), the tokens of all of them. */
function llmConvention(attempts: readonly CallAttempt[]): Convention {
  const calls = attempts.flatMap((attempt) => {
    const parsed = LlmCall.safeParse(attempt.call ?? {});
    return parsed.success ? [parsed.data] : [];
  });
  const last = calls.at(-1);
  const tokens = calls.flatMap((call) => (call.tokens ? [call.tokens] : []));
  const sum = (pick: (t: { input: number; output: number }) => number) => tokens.reduce((n, t) => n + pick(t), 0);
  return {
    name: last?.model === undefined ? "chat" : `chat ${last.model}`,
    client: true,
    attributes: {
      "gen_ai.operation.name": "chat",
      ...(last?.provider === undefined
        ? {}
        : { "gen_ai.provider.name": last.provider, "gen_ai.system": last.provider }),
      ...(last?.model === undefined ? {} : { "gen_ai.request.model": last.model }),
      ...(tokens.length === 0
        ? {}
        : { "gen_ai.usage.input_tokens": sum((t) => t.input), "gen_ai.usage.output_tokens": sum((t) => t.output) }),
      ...(last?.finish_reason === undefined ? {} : { "gen_ai.response.finish_reasons": [last.finish_reason] }),
    },
  };
}

/** The HTTP client conventions, from the last call (the method and URL are the same in each). */
function httpConvention(attempts: readonly CallAttempt[]): Convention {
  const parsed = HttpCall.safeParse(attempts.at(-1)?.call ?? {});
  const call = parsed.success ? parsed.data : {};
  return {
    name: call.method ?? "HTTP",
    client: true,
    attributes: {
      ...(call.method === undefined ? {} : { "http.request.method": call.method }),
      ...(call.url === undefined ? {} : { "url.full": call.url }),
      ...(call.status === undefined ? {} : { "http.response.status_code": call.status }),
    },
  };
}

/** An `mcp` or `tool` step is a tool execution in the GenAI conventions. */
function toolConvention(attempts: readonly CallAttempt[]): Convention {
  const parsed = ToolCall.safeParse(attempts.at(-1)?.call ?? {});
  const call = parsed.success ? parsed.data : {};
  return {
    name: call.tool === undefined ? "execute_tool" : `execute_tool ${call.tool}`,
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      ...(call.tool === undefined ? {} : { "gen_ai.tool.name": call.tool }),
      ...(call.server === undefined ? {} : { "trellis.mcp.server": call.server }),
    },
  };
}
