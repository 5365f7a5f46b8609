import type { Json } from "../schemas/common.ts";
import type { StepRecord } from "../schemas/payload.ts";
import type { ChildLink, InvocationRecord, StepSummary } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * What the run view shows of an invocation without reading the journal: its
 * steps at a glance and the child runs it started. Both ride on the
 * invocation's own record, written with the result that changes them, so
 * they cost no durable write of their own.
 */

/**
 * The invocation's step summaries after a dispatch reported `steps`. A fresh
 * attempt starts at the task's first step and replaces them all; a
 * continuation starts at the step it resumed, so the steps before it stay as
 * the earlier dispatch left them.
 */
export function mergeStepSummaries(
  previous: readonly StepSummary[] | undefined,
  steps: readonly StepRecord[],
): StepSummary[] {
  const first = steps[0]?.step;
  const resumedAt = previous?.findIndex((summary) => summary.step === first) ?? -1;
  const kept = previous && resumedAt > 0 ? previous.slice(0, resumedAt) : [];
  const [resumed, ...rest] = steps.map(summarizeStep);
  const waited = resumedAt >= 0 ? previous?.[resumedAt] : undefined;
  // The step that waited keeps what it spent before its wait: an agent's turns add up over its dispatches.
  const continued = resumed && waited?.status === "suspended" ? addUp(waited, resumed) : resumed;
  return [...kept, ...(continued ? [continued, ...rest] : [])];
}

function addUp(before: StepSummary, after: StepSummary): StepSummary {
  const tokens =
    (before.tokens ?? after.tokens)
      ? {
          tokens: {
            input: (before.tokens?.input ?? 0) + (after.tokens?.input ?? 0),
            output: (before.tokens?.output ?? 0) + (after.tokens?.output ?? 0),
          },
          cost_usd: Math.round(((before.cost_usd ?? 0) + (after.cost_usd ?? 0)) * 1e9) / 1e9,
        }
      : {};
  return {
    ...after,
    attempts: before.attempts + after.attempts,
    duration_ms: before.duration_ms + after.duration_ms,
    ...tokens,
  };
}

function summarizeStep(record: StepRecord): StepSummary {
  let input = 0;
  let output = 0;
  let cost = 0;
  let llm = false;
  for (const attempt of record.attempts) {
    const tokens = objectOf(attempt.call?.tokens);
    if (tokens) {
      llm = true;
      input += numberOf(tokens.input);
      output += numberOf(tokens.output);
      cost += numberOf(attempt.call?.cost_usd);
    }
  }
  return {
    step: record.step,
    status: record.status,
    attempts: record.attempts.length,
    duration_ms: record.duration_ms,
    ...(record.error ? { error: record.error.code } : {}),
    // Rounded as the llm action rounds each call, so a sum shows no float noise.
    ...(llm ? { tokens: { input, output }, cost_usd: Math.round(cost * 1e9) / 1e9 } : {}),
  };
}

/** The invocation, its link to the child that ended updated with how it ended. */
export function withChildStatus(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  outcome: { run_id: string | null; status: NonNullable<ChildLink["status"]> },
): InvocationRecord {
  const link = invocation.children?.find((child) => child.run_id === outcome.run_id);
  if (link === undefined) {
    return invocation;
  }
  draft.setInvocation(nodeId, invocation.index, {
    children: withChild(invocation.children, { ...link, status: outcome.status }),
  });
  return draft.invocation(nodeId, invocation.index) ?? invocation;
}

/** The invocation's child links with `child` added, or the one with its run id updated. */
export function withChild(children: readonly ChildLink[] | undefined, child: ChildLink): ChildLink[] {
  const list = children ?? [];
  return list.some((link) => link.run_id === child.run_id)
    ? list.map((link) => (link.run_id === child.run_id ? { ...link, ...child } : link))
    : [...list, child];
}

function objectOf(value: Json | undefined): Record<string, Json> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
}

function numberOf(value: Json | undefined): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}
