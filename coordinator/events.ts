import type { GateLink } from "../schemas/approvers.ts";
import type { By } from "../schemas/auth.ts";
import type { Json } from "../schemas/common.ts";
import type { TaskResult } from "../schemas/payload.ts";
import type { LiveWork } from "./live.ts";
import type { ChildOutcome } from "./child-results.ts";
import type { ReceivedEvent } from "./wait-events.ts";
import type { AcquireAnswer } from "../schemas/limits.ts";

/** The calls a wake may make: executor calls, and calls to other runs and containers (child starts, cleanup). */
export interface WakeBudget {
  executorCalls: number;
  otherCalls: number;
}

/** What `decide` reacts to: each event is one row of its handler table. */
export type RunEvent =
  /** Leave `drafting` (auto start, or an approval): the run is queued and starts on the next wake. */
  | { type: "start"; by?: By }
  /**
   * The alarm: fire due timers, find lost dispatches, dispatch ready work, within `budget` (a whole
   * event's when absent; a wake that follows results in their own event has what that event left).
   */
  | { type: "wake"; live: LiveWork; budget?: WakeBudget }
  | { type: "task_result"; result: TaskResult }
  /** Several results at once, applied in order, with one settling pass after them all. */
  | { type: "task_results"; results: readonly TaskResult[] }
  /** The controls: `by` is who asked (journaled as `by`), absent when the engine itself acts. */
  | { type: "cancel"; reason: string; by?: By }
  | { type: "pause"; by?: By }
  | { type: "resume"; by?: By }
  /** Re-run a failed run from its failed nodes, keeping what completed (or resume its failed compensation). */
  | { type: "redrive"; by?: By }
  /** Run the undos of a failed or cancelled run, by hand (`POST /v1/runs/{id}/compensate`). */
  | { type: "compensate"; by?: By }
  /**
   * A valid answer to an open gate (checked against its schema and approvers by the Durable Object):
   * `by` is who answered, `responder` their free-text note.
   */
  | { type: "gate_answer"; gate_id: string; response: Json; responder: string | null; by?: By }
  /** An approval link of an open gate (its secret's hash, its approver), checked by the Durable Object. */
  | { type: "gate_link"; gate_id: string; link: GateLink }
  /** Standing approvals of plan steps: their open approval gates, and those that open later, are granted. */
  | { type: "approve_steps"; steps: readonly string[]; responder: string | null; by?: By }
  /** A child run this run asked for exists now. */
  | { type: "child_started"; key: string; run_id: string }
  /** A child run ended, or could not start (`run_id` null). */
  | { type: "child_finished"; outcome: ChildOutcome }
  /** This child run's parent acknowledged its result. */
  | { type: "parent_notified" }
  /** Child runs this run cancelled confirmed it (or had ended already, or never existed). */
  | { type: "children_cancelled"; keys: readonly string[] }
  /** These containers' `release()` answered. */
  | { type: "containers_released"; containers: readonly string[] }
  /** A signal to this run (the Durable Object checked the run is not over and the id is new). */
  | { type: "signal"; received: ReceivedEvent }
  /** The event hubs registered an event wait and answered the events they kept that it takes (its lookback). */
  | { type: "event_registered"; key: string; events: readonly ReceivedEvent[] }
  /** A hub delivers an event to an event wait. */
  | { type: "event_delivered"; key: string; received: ReceivedEvent }
  /** A limit object answered a queue request of this run (a step's holder, or the run's own). */
  | { type: "limit_queued"; holder_id: string; answer: AcquireAnswer }
  /** A limit object served a holder of this run that was queued. */
  | { type: "limit_granted"; holder_id: string }
  /** These limit objects gave up the run's slots and places (`pending_limit_releases`). */
  | { type: "limits_released"; objects: readonly string[] };
