import { Mutex } from "../lib/mutex.ts";
import type { CallBudget } from "./call-budget.ts";
import type { TaskResult } from "../schemas/payload.ts";
import type { RunEvent } from "./events.ts";

/**
 * How long a result waits for others before it is committed, when more are
 * expected: each commit of a Durable Object costs a durable write.
 */
const GROUP_COMMIT_WINDOW_MS = 4;
/** Events applied together in one transaction, at most. */
const MAX_EVENTS_PER_BATCH = 256;

/**
 * Applies events in one transaction. `budget` is the calls left to the event
 * the batch runs in, when a wake may follow the events there (else null).
 */
export type ApplyBatch = (events: readonly RunEvent[], budget: CallBudget | null) => Promise<void>;

interface Waiting {
  event: RunEvent;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * The run's event inbox. Events are applied one batch at a time, in arrival
 * order: events that arrive while another batch is being applied wait here
 * and are then applied together in one storage transaction (a group commit:
 * a burst of results costs one write).
 */
export class EventInbox {
  private readonly queue: Waiting[] = [];
  private readonly mutex = new Mutex();
  /** A group-commit timer is set; results arriving meanwhile join its batch. */
  private gathering = false;

  /**
   * @param applyBatch applies events in one transaction.
   * @param isBusy whether other work is in flight (its results then tend to arrive in bursts).
   */
  constructor(
    private readonly applyBatch: ApplyBatch,
    private readonly isBusy: () => boolean,
  ) {}

  /** Runs `work` between batches, alone: nothing is applied while it runs (an erasure). */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.mutex.run(work);
  }

  /**
   * Queues an event; resolves once a batch holding it is applied. A batch
   * runs in the event of the call that set it going (the mutex keeps the
   * caller's async context), so it spends that event's `budget`.
   */
  apply(event: RunEvent, budget: CallBudget | null = null): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ event, resolve, reject });
      // While other tasks are in flight their results tend to arrive in bursts:
      // waiting a moment lets one commit carry the whole burst.
      const gather = event.type === "task_result" && this.isBusy() ? GROUP_COMMIT_WINDOW_MS : 0;
      if (gather === 0) {
        void this.mutex.run(() => this.applyQueued(budget));
      } else if (!this.gathering) {
        // One timer per window, not one per result: it applies whatever the inbox holds by then.
        this.gathering = true;
        setTimeout(() => {
          this.gathering = false;
          void this.mutex.run(() => this.applyQueued(budget));
        }, gather);
      }
    });
  }

  /**
   * Applies every waiting event, then the events `after` makes (it runs once
   * the turn has come, so what it reads is current), in one batch: events
   * that waited go first, so what follows sees their effects.
   */
  async applyAll(after: () => readonly RunEvent[], budget: CallBudget): Promise<void> {
    await this.mutex.run(async () => {
      const batch = this.queue.splice(0);
      try {
        await this.applyBatch([...batch.map((item) => item.event), ...after()], budget);
        batch.forEach((item) => item.resolve());
      } catch (error) {
        batch.forEach((item) => item.reject(error));
        throw error;
      }
    });
  }

  /** Tokens of the task results waiting here: delivered, not applied yet (their dispatches are not lost). */
  queuedTokens(): string[] {
    return this.queue.flatMap(({ event }) => (event.type === "task_result" ? [event.result.token_id] : []));
  }

  private async applyQueued(budget: CallBudget | null): Promise<void> {
    const batch = this.queue.splice(0, MAX_EVENTS_PER_BATCH);
    if (batch.length === 0) {
      return; // An earlier turn already applied these events.
    }
    try {
      await this.applyBatch(
        batch.map((item) => item.event),
        budget,
      );
      for (const item of batch) {
        item.resolve();
      }
    } catch (error) {
      for (const item of batch) {
        item.reject(error);
      }
    }
    if (this.queue.length > 0 && !this.gathering) {
      void this.mutex.run(() => this.applyQueued(budget)); // More than one batch was waiting.
    }
  }
}

/**
 * Runs of consecutive task results become one `task_results` event: the same
 * outcome as applying them one by one, with one settling pass instead of one
 * per result (a burst of a hundred results is one pass, not a hundred).
 */
export function coalesceResults(events: readonly RunEvent[]): RunEvent[] {
  const out: RunEvent[] = [];
  // The results of the event last added, when it is a `task_results`: a result joins this array, not a copy of it.
  let results: TaskResult[] | null = null;
  for (const event of events) {
    if (event.type === "task_result" && results !== null) {
      results.push(event.result);
    } else if (event.type === "task_result" || event.type === "task_results") {
      results = event.type === "task_result" ? [event.result] : [...event.results];
      out.push({ type: "task_results", results });
    } else {
      results = null;
      out.push(event);
    }
  }
  return out;
}
