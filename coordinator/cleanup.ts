import type { RunRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import type { LiveWork } from "./live.ts";

/**
 * What a run still owes after it decided to stop something: child runs to
 * cancel (`pending_cancels`, by start key), containers to release
 * (`pending_releases`, by durable name) and limit objects to give up its
 * slots at (`pending_limit_releases`, by object name). The lists are committed with the
 * decision that makes them (a cancel, a fail_fast, the terminal state), so a
 * restart right after that commit loses nothing: every wake sends what is
 * pending and no call of this instance carries, and the list shrinks only
 * when the other side answered (`children_cancelled`, `containers_released`,
 * or a child's own report that it ended). Both calls are idempotent: a cancel
 * of a run that already ended answers `run.terminal`, a second `release()`
 * stops nothing and answers.
 *
 * The wake's live work ({@link LiveWork}) says which of these calls are in
 * flight in this instance (`cancels`, `releases`).
 */

/**
 * Cancels and releases sent per Durable Object event, at most: one call each.
 * They share the wake's 10 calls for child starts (two calls each): a wake
 * that sends `n` of them starts at most `5 - ceil(n / 2)` children.
 */
export const MAX_CLEANUP_CALLS_PER_EVENT = 10;

export function hasPendingCleanup(record: RunRecord): boolean {
  return (
    (record.pending_cancels?.length ?? 0) > 0 ||
    (record.pending_releases?.length ?? 0) > 0 ||
    (record.pending_limit_releases?.length ?? 0) > 0
  );
}

/**
 * Sends what is pending and not in flight, at most `budget` calls (cancels
 * first); returns how many. A child whose start this instance is still
 * making is left alone: it is cancelled once its start returned. What the
 * budget leaves over asks for another wake now.
 */
export function sendCleanup(draft: Draft, live: LiveWork, budget: number): number {
  const cancels = (draft.record.pending_cancels ?? []).filter(
    (key) => !live.childStarts.has(key) && !live.cancels.has(key),
  );
  const releases = (draft.record.pending_releases ?? []).filter((container) => !live.releases.has(container));
  const limits = (draft.record.pending_limit_releases ?? []).filter((name) => !live.limitReleases.has(name));
  const keys = cancels.slice(0, budget);
  const containers = releases.slice(0, budget - keys.length);
  const objects = limits.slice(0, budget - keys.length - containers.length);
  if (keys.length > 0) {
    draft.commands.push({ kind: "cancel_children", keys });
  }
  if (containers.length > 0) {
    draft.commands.push({ kind: "release_resources", containers });
  }
  if (objects.length > 0) {
    draft.commands.push({ kind: "release_limits", objects });
  }
  const sent = keys.length + containers.length + objects.length;
  if (sent < cancels.length + releases.length + limits.length) {
    draft.cleanupDeferred = true;
  }
  return sent;
}
