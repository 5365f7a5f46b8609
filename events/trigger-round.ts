import { ensureEngineError } from "../lib/errors.ts";
import { MAX_EVENT_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { withBlobLookup, type BlobLookup } from "../lib/expr/blob-scope.ts";
import type { CreateRunOutcome } from "../coordinator/index.ts";
import type { Json } from "../schemas/common.ts";
import type { TriggerList } from "../schemas/definitions.ts";
import type { EventRecord } from "../schemas/events.ts";
import type { TriggeredStart } from "../src/start.ts";
import { retryAt } from "./rounds.ts";
import type { PendingStart, TriggerOutbox } from "./store.ts";
import {
  isTransient,
  MAX_TRIGGER_EVENTS_PER_ROUND,
  MAX_TRIGGER_NAMES_PER_ROUND,
  MAX_TRIGGER_START_ATTEMPTS,
  MAX_TRIGGER_STARTS_PER_ROUND,
  planStarts,
  toTriggeredStart,
  TRIGGER_LEASE_MS,
} from "./triggers.ts";

/** What a trigger round touches: the hub's outbox, its transactions and clock, the catalog's index and the start. */
export interface TriggerRoundDeps {
  outbox: TriggerOutbox;
  transaction: <T>(work: () => T) => T;
  now: () => number;
  triggersFor: (name: string) => Promise<TriggerList>;
  startRun: (start: TriggeredStart) => Promise<CreateRunOutcome>;
  /** Reads ahead the blobs events' data refer to, for triggers' `if` and `input` to read into (blobs/preload.ts). */
  readBlobs: (values: readonly unknown[]) => Promise<BlobLookup | null>;
}

/**
 * One round of trigger work in one Durable Object event: matches up to
 * {@link MAX_TRIGGER_EVENTS_PER_ROUND} accepted events of at most
 * {@link MAX_TRIGGER_NAMES_PER_ROUND} names against their names' triggers
 * (one catalog call per name), then makes up to
 * {@link MAX_TRIGGER_STARTS_PER_ROUND} starts. Whatever it takes is leased
 * first, so a round that dies is resumed by the alarm when the lease ends.
 * Answers whether it took a full load (more may be due now).
 */
export async function runTriggerRound(deps: TriggerRoundDeps): Promise<boolean> {
  const moreToMatch = await matchEvents(deps);
  const started = await makeStarts(deps);
  return moreToMatch || started === MAX_TRIGGER_STARTS_PER_ROUND;
}

/** Matches a round's events; answers whether due events were left for the next. */
async function matchEvents(deps: TriggerRoundDeps): Promise<boolean> {
  const now = deps.now();
  const limits = { events: MAX_TRIGGER_EVENTS_PER_ROUND, names: MAX_TRIGGER_NAMES_PER_ROUND };
  const { taken, more } = deps.transaction(() => deps.outbox.takeEvents(now, limits, now + TRIGGER_LEASE_MS));
  if (taken.length === 0) {
    return more;
  }
  const names = [...new Set(taken.map(({ event }) => event.name))];
  const lists = new Map(
    await Promise.all(names.map(async (name) => [name, await settle(deps.triggersFor(name))] as const)),
  );
  // Only events whose triggers read them (an `if`, an `input` mapping) have their blobs read.
  const read = taken.filter(({ event }) => {
    const list = lists.get(event.name);
    return (
      list?.ok === true &&
      list.value.triggers.some((trigger) => trigger.if !== undefined || trigger.input !== undefined)
    );
  });
  const blobs = await deps.readBlobs(read.map(({ event }) => event.data));
  const after = deps.now();
  deps.transaction(() => {
    for (const { seq, attempts, event } of taken) {
      const list = lists.get(event.name);
      if (list?.ok === true) {
        // Each event's expressions with a budget of their own: one costly event does not fail the others'.
        const budget = new WorkBudget(MAX_EVENT_WORK_UNITS, "event trigger match");
        const plan = () => withWorkBudget(budget, () => planStarts(event, list.value.triggers));
        deps.outbox.expand(seq, blobs === null ? plan() : withBlobLookup(blobs, plan), after);
      } else {
        deps.outbox.retryEvent(seq, retryAt(attempts + 1, after), attempts + 1);
        logFailure("event trigger match failed", event, list?.error);
      }
    }
  });
  return more;
}

async function makeStarts(deps: TriggerRoundDeps): Promise<number> {
  const now = deps.now();
  const taken = deps.transaction(() =>
    deps.outbox.takeStarts(now, MAX_TRIGGER_STARTS_PER_ROUND, now + TRIGGER_LEASE_MS),
  );
  const outcomes = await Promise.all(
    taken.map((start) => settle(deps.startRun(toTriggeredStart(start.event, { ...start, input: parseInput(start) })))),
  );
  const after = deps.now();
  deps.transaction(() => {
    taken.forEach((start, index) => {
      const outcome = outcomes[index];
      if (outcome !== undefined) {
        deps.outbox.settle(start, toSettlement(start, outcome, after));
      }
    });
  });
  return taken.length;
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

async function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** What became of a start: its run, a failure for good, or another try after a backoff (until the bound). */
function toSettlement(start: PendingStart & { event: EventRecord }, outcome: Settled<CreateRunOutcome>, now: number) {
  if (outcome.ok) {
    return { status: "started" as const, run_id: outcome.value.run.run_id };
  }
  const error = ensureEngineError(outcome.error);
  const reason = `${error.code}: ${error.message}`;
  const attempts = start.attempts + 1;
  logFailure("event trigger start failed", start.event, outcome.error, start.workflow);
  if (!isTransient(outcome.error)) {
    return { status: "failed" as const, error: reason };
  }
  if (attempts >= MAX_TRIGGER_START_ATTEMPTS) {
    return { status: "failed" as const, error: `gave up after ${attempts} attempts: ${reason}` };
  }
  return { status: "retry" as const, at: retryAt(attempts, now), attempts, error: reason };
}

function parseInput(start: PendingStart): Json {
  // Written by TriggerOutbox.expand from a built JSON value.
  return JSON.parse(start.input) as Json;
}

function logFailure(msg: string, event: EventRecord, error: unknown, workflow?: string): void {
  console.error(
    JSON.stringify({
      msg,
      event: event.name,
      event_id: event.event_id,
      ...(workflow === undefined ? {} : { workflow }),
      error: ensureEngineError(error).message,
    }),
  );
}
