/**
 * What the node panel says of each call of a step (docs/journal.md, "Step
 * records"): how it went, how long it took, its error, how long the step
 * waited before the next call and why, and what the call did as its action
 * kind reports it. An `llm` call's record is read in full: provider, model,
 * the messages sent, the answer, tokens, cost and finish reason. Pure, so it
 * is unit-tested (test/node/console-agent.test.ts).
 */
import { z } from "zod";
import type { CallAttempt, StepRecord } from "../../schemas/payload.ts";

/** A value a step record keeps whole up to 4,096 characters, else as its digest and a preview (lib/recordable.ts). */
export const Recorded = z.looseObject({ sha256: z.string(), chars: z.number(), preview: z.string() });
export type Recorded = z.infer<typeof Recorded>;

const Message = z.looseObject({ role: z.string(), content: z.string() });

const LlmCallRecord = z.looseObject({
  provider: z.string(),
  model: z.string(),
  messages: z.union([z.array(Message), Recorded]).optional(),
  answer: z.union([z.string(), Recorded]).optional(),
  tokens: z.looseObject({ input: z.number(), output: z.number() }).optional(),
  cost_usd: z.number().optional(),
  finish_reason: z.string().optional(),
  /** An agent's turn that asked for tools instead of answering (executor/actions/llm.ts notes their ids and names). */
  tool_calls: z.array(z.looseObject({ name: z.string() })).optional(),
});

const HttpCallRecord = z.looseObject({ method: z.string(), url: z.string(), status: z.number().optional() });

/** An `llm` call as the panel shows it; a value kept as a digest shows its preview and size. */
export interface LlmCall {
  provider: string;
  model: string;
  messages: { role: string; content: string }[];
  /** Set when the messages were too long to keep whole: the record holds a preview. */
  messagesCut: string | null;
  answer: string | null;
  tokens: { input: number; output: number } | null;
  costUsd: number | null;
  finishReason: string | null;
  /** The tools an agent's turn asked for, by name, in order (empty: it answered). */
  toolCalls: string[];
}

export interface CallLine {
  attempt: number;
  ok: boolean;
  durationMs: number;
  error: string | null;
  /** The wait before the next call, e.g. `waited 200 ms (backoff) before call 2`. */
  retry: string | null;
  llm: LlmCall | null;
  /** A one-line account of any other kind's call (`GET https://… → 503`), or null. */
  detail: string | null;
}

/** The action kind of a step record's `action` (`"<kind> <id>@<version>"`). */
export function kindOf(step: Pick<StepRecord, "action">): string {
  return step.action.split(" ")[0] ?? "";
}

/** Milliseconds as the console writes them: `850 ms`, `1.2 s`, `2 min 5 s`. */
export function formatMs(ms: number): string {
  if (ms < 1_000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60_000) {
    return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  }
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms - minutes * 60_000) / 1_000)} s`;
}

/** US dollars with as many decimals as a small LLM cost needs. */
export function formatUsd(usd: number): string {
  return usd === 0 ? "$0" : usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(2)}`;
}

/** Each call of the step, in order. */
export function callLines(step: StepRecord): CallLine[] {
  const kind = kindOf(step);
  return step.attempts.map((attempt) => ({
    attempt: attempt.attempt,
    ok: attempt.error === undefined,
    durationMs: attempt.duration_ms,
    error: attempt.error === undefined ? null : `${attempt.error.code}: ${attempt.error.message}`,
    retry: retryText(attempt),
    llm: kind === "llm" ? toLlmCall(attempt.call) : null,
    detail: kind === "llm" ? null : detailText(kind, attempt.call),
  }));
}

function retryText(attempt: CallAttempt): string | null {
  if (attempt.retry_in_ms === undefined) {
    return null;
  }
  if (attempt.retry_reason === "fallback") {
    return `call ${attempt.attempt + 1} went to the next model at once (fallback)`;
  }
  if (attempt.retry_reason === "repair") {
    return `call ${attempt.attempt + 1} asked the model to repair its answer`;
  }
  const why = attempt.retry_reason === "retry_after" ? "the peer's Retry-After" : "backoff";
  return `waited ${formatMs(attempt.retry_in_ms)} (${why}) before call ${attempt.attempt + 1}`;
}

/** An `llm` call record, or null when there is none (a call that failed before its record). */
export function toLlmCall(call: unknown): LlmCall | null {
  const parsed = LlmCallRecord.safeParse(call);
  if (!parsed.success) {
    return null;
  }
  const { messages, answer, tokens } = parsed.data;
  const cut = messages !== undefined && !Array.isArray(messages);
  return {
    provider: parsed.data.provider,
    model: parsed.data.model,
    messages: Array.isArray(messages) ? messages.map(({ role, content }) => ({ role, content })) : [],
    messagesCut: cut ? recordedText(messages) : null,
    answer: answer === undefined ? null : typeof answer === "string" ? answer : recordedText(answer),
    tokens: tokens === undefined ? null : { input: tokens.input, output: tokens.output },
    costUsd: parsed.data.cost_usd ?? null,
    finishReason: parsed.data.finish_reason ?? null,
    toolCalls: (parsed.data.tool_calls ?? []).map((call) => call.name),
  };
}

/** A value kept as its digest: its preview, size and the start of its digest. */
export function recordedText(value: Recorded): string {
  return `${value.preview}… (${value.chars} characters, sha256 ${value.sha256.slice(0, 12)}…)`;
}

function detailText(kind: string, call: CallAttempt["call"]): string | null {
  if (call === undefined) {
    return null;
  }
  const http = kind === "http" ? HttpCallRecord.safeParse(call) : null;
  if (http?.success === true) {
    const { method, url, status } = http.data;
    return `${method} ${url} → ${status ?? "no answer"}`;
  }
  const text = JSON.stringify(call);
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}
