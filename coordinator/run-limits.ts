import { ensureEngineError } from "../lib/errors.ts";
import { limitKeyOf } from "../limits/key.ts";
import { limitObjectName } from "../limits/names.ts";
import type { AcquireAnswer } from "../schemas/limits.ts";
import type { RunLimit } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * A workflow's limits (docs/definitions.md, "Limits"): they count its runs. A
 * run asks for a slot of each, in order, while `queued`, and starts its first
 * node only once it holds them all; it holds them to its end, and gives them
 * up then (`pending_limit_releases`, retried by wakes until the objects answer).
 * Each request is one call of a wake, sent again when unanswered; the object
 * answers at once (held, or queued) and, when it serves a queued run later,
 * calls the run's `limitGranted`.
 */

/** A queue request sent and not answered is sent again after this long (queueing is idempotent per holder). */
export const QUEUE_RETRY_MS = 5_000;

/** The holder id of a run at its workflow's limits. */
export function runHolderId(runId: string): string {
  return `run:${runId}`;
}

/**
 * Whether the run holds every limit of its workflow. If not, asks for the
 * first it lacks (a call, unless one is out and recent) and answers false: the
 * run stays `queued`. A key that does not evaluate fails the run.
 */
export function holdRunLimits(draft: Draft): boolean {
  const uses = draft.snapshot.limits;
  if (uses === undefined) {
    return true;
  }
  if ((draft.record.pending_limit_releases?.length ?? 0) > 0) {
    return false; // a redriven run asks again only once its old slots are given up
  }
  const limits = draft.record.limits ?? startWaiting(draft);
  if (limits === null) {
    return false;
  }
  const index = limits.findIndex((limit) => limit.status !== "held");
  const use = uses[index];
  const limit = limits[index];
  if (use === undefined || limit === undefined) {
    return true;
  }
  if (dueToAsk(limit, draft.now)) {
    draft.commands.push({
      kind: "queue_for_limit",
      limit: use.limit,
      key: limit.key,
      holder: { id: runHolderId(draft.record.run_id), run_id: draft.record.run_id, priority: draft.priority },
      lease: "run",
    });
    setLimit(draft, index, { requested_at: draft.now });
  }
  return false;
}

/** A request never sent, or sent and unanswered for QUEUE_RETRY_MS (queueing is idempotent per holder). */
function dueToAsk(limit: RunLimit, now: number): boolean {
  if (limit.requested_at === null) {
    return true;
  }
  return !limit.queued && now - limit.requested_at >= QUEUE_RETRY_MS;
}

/** Each limit's key over the run's input, all waiting; null (and the run failed) when one does not evaluate. */
function startWaiting(draft: Draft): RunLimit[] | null {
  const uses = draft.snapshot.limits ?? [];
  try {
    const keys = uses.map((use) => limitKeyOf(use.key, draft.record.context.input));
    const limits = keys.map((key) => ({
      key,
      status: "waiting" as const,
      since: draft.now,
      requested_at: null,
      queued: false,
    }));
    draft.record.limits = limits;
    return limits;
  } catch (thrown) {
    const error = ensureEngineError(thrown, "limit.invalid_key");
    draft.finish("failed", error.message, { code: error.code, message: error.message });
    return null;
  }
}

function setLimit(draft: Draft, index: number, change: Partial<RunLimit>): void {
  const limits = [...(draft.record.limits ?? [])];
  const limit = limits[index];
  if (limit !== undefined) {
    limits[index] = { ...limit, ...change };
    draft.record.limits = limits;
  }
}

/** The limit this run waits for now (the first it does not hold), with its index. */
function waitingLimit(draft: Draft): { index: number; limit: RunLimit } | undefined {
  const index = (draft.record.limits ?? []).findIndex((limit) => limit.status === "waiting");
  const limit = draft.record.limits?.[index];
  return draft.record.status === "queued" && limit !== undefined ? { index, limit } : undefined;
}

/** The limit object answered the run's request: held now, or queued (journaled, with its priority). */
export function runLimitQueued(draft: Draft, answer: AcquireAnswer): void {
  const waiting = waitingLimit(draft);
  if (waiting === undefined || waiting.limit.requested_at === null) {
    return;
  }
  if (answer.granted) {
    runLimitGranted(draft);
    return;
  }
  if (!waiting.limit.queued) {
    draft.journal("run.limit_waiting", { ...limitOf(draft, waiting.index), priority: draft.priority });
    setLimit(draft, waiting.index, { queued: true });
  }
}

/** The run holds the slot it waited for; a wake asks for the next, or starts the run. */
export function runLimitGranted(draft: Draft): boolean {
  const waiting = waitingLimit(draft);
  if (waiting === undefined || waiting.limit.requested_at === null) {
    return false;
  }
  const waitedMs = Math.max(0, draft.now - waiting.limit.since);
  draft.journal("run.limit_granted", { ...limitOf(draft, waiting.index), waited_ms: waitedMs });
  setLimit(draft, waiting.index, { status: "held", since: draft.now, queued: false });
  return true;
}

function limitOf(draft: Draft, index: number) {
  const use = draft.snapshot.limits?.[index];
  const limit = draft.record.limits?.[index];
  return { limit: { id: use?.limit.id ?? "", version: use?.limit.version ?? 0 }, limit_key: limit?.key ?? "" };
}

/**
 * The run ended: every limit object it asked gives up its slot and place
 * (committed with the end; a wake sends them). A redrive asks again.
 */
export function releaseRunLimits(draft: Draft): void {
  const uses = draft.snapshot.limits ?? [];
  const objects = (draft.record.limits ?? []).flatMap((limit, index) => {
    const use = uses[index];
    const asked = limit.status === "held" || limit.requested_at !== null;
    return use !== undefined && asked ? [limitObjectName(use.limit.id, limit.key)] : [];
  });
  draft.addCleanup("pending_limit_releases", objects);
  delete draft.record.limits;
}

/**
 * When a queued run that is due next needs a wake: now to start (or to ask),
 * when to resend an unanswered request, or null while an object has it queued.
 */
export function runLimitsWakeAt(draft: Draft): number | null {
  if (draft.snapshot.limits === undefined) {
    return draft.now;
  }
  const limit = (draft.record.limits ?? []).find((each) => each.status !== "held");
  if (draft.record.limits === undefined || limit === undefined || limit.requested_at === null) {
    return draft.now; // to ask, or (all held) to start
  }
  return limit.queued ? null : limit.requested_at + QUEUE_RETRY_MS;
}
