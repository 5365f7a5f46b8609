import { DurableObject } from "cloudflare:workers";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { importSigningKey, signEntry, type JournalSigningKey } from "../lib/journal/index.ts";
import { validateJson } from "../lib/json-schema.ts";
import { Mutex } from "../lib/mutex.ts";
import { toResult, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { Catalog } from "../catalog/catalog.ts";
import type { Json } from "../lib/expr/mapping.ts";
import {
  ACTION_TRAITS,
  APPROVAL_SCHEMA,
  GateAnswerBody,
  type TaskResult,
  type GateView,
  type JournalEntry,
  type RunSnapshot,
  type RunStatus,
  type RunView,
  type TaskPayload,
} from "../schemas/index.ts";
import {
  cancelChildRuns,
  ChildNotification,
  notifyParentRun,
  startChildRun,
  toGateView,
  type RunPeer,
  type RunPeers,
} from "./children.ts";
import { cancelMarker, hasPendingCleanup, NOTIFY_MARKER, releaseMarker } from "./cleanup.ts";
import { chunk, sendTaskGroup } from "./executor-client.ts";
import { decide, TASKS_PER_EXECUTOR_CALL, type Command, type RunEvent, type RunState } from "./decide.ts";
import { isTerminal } from "./lifecycle.ts";
import { CreateRunRequest, newRunState, type CreateRunOutcome } from "./create.ts";
import { RunStore, type UnsignedEntry } from "./storage.ts";
import { toRunView } from "./view.ts";
import { unstartedChild } from "./waits.ts";

/** Journal entries returned by one events call. */
const EVENTS_PAGE = 500;
/**
 * Journal entries returned by one journal call, at most: a long journal is
 * read in pages (a 1,000-item foreach writes over 2,000 entries), so no
 * single RPC answer grows with the run.
 */
export const JOURNAL_PAGE = 1_000;
/** The longest a long poll for events waits. */
const MAX_EVENTS_WAIT_MS = 30_000;

/**
 * How long a result waits for others before it is committed, when more are
 * expected: each commit of a Durable Object costs a durable write.
 */
const GROUP_COMMIT_WINDOW_MS = 4;
/**
 * A decision that sends work in this many executor calls or more, of tasks
 * that wait on I/O, commits its journal entries unsigned and signs them while
 * the work runs. Narrower waves, and waves of pure computation that come back
 * at once, sign first: there the extra commit costs more than it saves.
 */
const DEFER_SIGNING_MIN_CALLS = 2;
/** Events applied together in one transaction, at most. */
const MAX_EVENTS_PER_BATCH = 256;
/**
 * At most this many self-wakes follow each other before an alarm takes over:
 * every self-call nests one subrequest deeper than the event that made it,
 * and the platform limits that depth; an alarm starts again from the top.
 */
const MAX_SELF_WAKE_STREAK = 4;
/** The alarm set behind a self-wake, in case that call is lost. */
const WAKE_BACKSTOP_MS = 2_000;

/** What tests read to check the platform's per-event invocation cap. */
export interface CoordinatorStats {
  /** The most executor calls (Worker invocations) made within one Durable Object event. */
  maxDispatchesPerEvent: number;
  /** The most tasks dispatched within one event (several travel in one call). */
  maxTasksPerEvent: number;
  /** The most tasks in one executor call (the platform lets an invocation wait on six connections at once). */
  maxTasksPerCall: number;
  /** The most child runs started within one event (each is two calls: the catalog and the child). */
  maxChildStartsPerEvent: number;
  /** The most cancels of child runs and releases of containers sent within one event (one call each). */
  maxCleanupCallsPerEvent: number;
  /** Tasks dispatched in all. */
  dispatches: number;
  events: number;
}

/**
 * One run: its lifecycle, schedule, timers and signed journal. This class
 * loads state, asks {@link decide} what to do, persists the decision and its
 * journal entries in one transaction, then performs the dispatches. It does
 * not decide anything itself.
 */
export class Coordinator extends DurableObject<Env> {
  private readonly store: RunStore;
  private state: RunState | null = null;
  private snapshot: RunSnapshot | null = null;
  private lastHash: string | null = null;
  /** Entries committed with their decision but not signed yet (a wide wave signs after dispatching). */
  private unsigned: UnsignedEntry[] = [];
  private signingKey: Promise<JournalSigningKey> | null = null;
  /**
   * What this instance has in flight: tokens of the dispatches it awaits (any
   * other running dispatch was lost), keys of the child runs it is starting,
   * and the markers of cancels, releases and a report to the parent
   * (coordinator/cleanup.ts).
   */
  private readonly live = new Set<string>();
  /** Events are applied one batch at a time, in arrival order. */
  private readonly mutex = new Mutex();
  /** A call to our own wake() is on its way; more ready work need not send another. */
  private selfWakePending = false;
  /** Self-wakes since the last alarm: each nests one subrequest deeper. */
  private selfWakeStreak = 0;
  /** A group-commit timer is set; results arriving meanwhile join its batch. */
  private gathering = false;
  private readonly inbox: { event: RunEvent; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private alarmAt: number | null = null;
  /** Long polls waiting for the next journal entries. */
  private readonly journalWaiters = new Set<() => void>();
  private readonly stats: CoordinatorStats = {
    maxDispatchesPerEvent: 0,
    maxTasksPerEvent: 0,
    maxTasksPerCall: 0,
    maxChildStartsPerEvent: 0,
    maxCleanupCallsPerEvent: 0,
    dispatches: 0,
    events: 0,
  };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new RunStore(ctx.storage.sql);
    void ctx.blockConcurrencyWhile(async () => {
      const loaded = this.store.load();
      if (loaded) {
        this.state = loaded.state;
        this.snapshot = loaded.snapshot;
        this.lastHash = loaded.lastHash;
        this.unsigned = this.store.unsigned();
        if (this.unsigned.length > 0) {
          await this.signUnsigned(); // A restart came between a wave's commit and its signing.
        }
        this.alarmAt = await ctx.storage.getAlarm();
        if (hasWorkToResume(loaded.state)) {
          // A restart loses every dispatch and child start in flight: wake now to send them
          // again (the liveness alarm would find them within LIVENESS_CHECK_MS anyway).
          await this.setAlarm(Date.now());
        }
      }
    });
  }

  /** Creates the run, or returns it when this id already holds the same request (idempotency). */
  async create(request: unknown): Promise<Result<CreateRunOutcome>> {
    return toResult(async () => {
      const parsed = parseOrThrow(CreateRunRequest, request, "run.invalid_request", "the run request");
      if (this.state) {
        const { record } = this.state;
        if (record.request_hash !== parsed.request_hash) {
          throw EngineError.terminal(
            "run.idempotency_conflict",
            "this idempotency_key was already used for a different request",
          );
        }
        if (record.status === "drafting" && record.mode === "auto") {
          // Stored before creation and start were one transaction, and its start was lost.
          await this.applyAndWake([{ type: "start" }]);
        }
        return { created: false, run: this.summary() };
      }
      const problems = validateJson(parsed.snapshot.workflow.definition.input_schema, parsed.input, "input");
      if (problems.length > 0) {
        throw EngineError.terminal(
          "run.invalid_input",
          `the run input does not match the workflow's input_schema`,
          problems,
        );
      }
      await this.initialize(parsed);
      if (parsed.mode === "auto") {
        // This call is a fresh event: it may dispatch the first wave itself.
        await this.applyAndWake([]);
      }
      return { created: true, run: this.summary() };
    });
  }

  async get(): Promise<Result<RunView>> {
    return toResult(() => this.view());
  }

  /** Journal entries after `afterSeq`, at most `limit` (≤ JOURNAL_PAGE) of them: a page. */
  async journal(afterSeq?: number, limit?: number): Promise<Result<JournalEntry[]>> {
    return toResult(() => {
      this.requireRun();
      return this.store.journal(afterSeq ?? 0, Math.max(1, Math.min(limit ?? JOURNAL_PAGE, JOURNAL_PAGE)));
    });
  }

  /**
   * Journal entries after `afterSeq`; when there are none yet, waits up to
   * `waitMs` for the next ones (a long poll, so event streams need few calls).
   */
  async events(afterSeq: number, waitMs: number): Promise<Result<JournalEntry[]>> {
    return toResult(async () => {
      this.requireRun();
      const entries = this.store.journal(afterSeq, EVENTS_PAGE);
      if (entries.length > 0 || waitMs <= 0) {
        return entries;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(waitMs, MAX_EVENTS_WAIT_MS));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.journalWaiters.add(done);
      });
      return this.store.journal(afterSeq, EVENTS_PAGE);
    });
  }

  /** Cancels the run: no new dispatches, in-flight work abandoned, late results ignored. */
  async cancel(reason?: string): Promise<Result<RunView>> {
    return this.control(
      { type: "cancel", reason: reason ?? "cancelled by request" },
      (status) => !isTerminal(status),
      "the run is already",
    );
  }

  /** Stops new dispatches; what is in flight finishes. */
  async pause(): Promise<Result<RunView>> {
    return this.control(
      { type: "pause" },
      (status) => status === "queued" || status === "running" || status === "waiting",
      "only a queued, running or waiting run can be paused; this one is",
    );
  }

  async resume(): Promise<Result<RunView>> {
    return this.control(
      { type: "resume" },
      (status) => status === "paused",
      "only a paused run can be resumed; this one is",
    );
  }

  /** Re-runs a failed run from its failed nodes, keeping completed results, in the same journal. */
  async redrive(): Promise<Result<RunView>> {
    return this.control(
      { type: "redrive" },
      (status) => status === "failed",
      "only a failed run can be redriven; this one is",
    );
  }

  /** Starts a run created with `mode: "approval"`. */
  async approve(): Promise<Result<RunView>> {
    return this.control(
      { type: "start" },
      (status) => status === "drafting",
      "only a run waiting in drafting can be approved; this one is",
      true,
    );
  }

  /** Applies a control event when the run's status allows it, else a 409 `run.conflict`. */
  private async control(
    event: RunEvent,
    allowed: (status: RunStatus) => boolean,
    refusal: string,
    thenWake = false,
  ): Promise<Result<RunView>> {
    return toResult(async () => {
      const { record } = this.requireRun();
      if (!allowed(record.status)) {
        const code = isTerminal(record.status) ? "run.terminal" : "run.conflict";
        throw EngineError.terminal(code, `${refusal} ${record.status}`);
      }
      await (thenWake ? this.applyAndWake([event]) : this.apply(event));
      return this.view();
    });
  }

  /** The run's gates, open and closed. */
  async gates(): Promise<Result<GateView[]>> {
    return toResult(() => this.requireRun().record.gates.map(toGateView));
  }

  /**
   * Answers an open gate. The answer must match the gate's `input_schema`
   * (an approval takes `{ approved, reason? }`); a gate answers once. This
   * call is an event of its own, so the task resumes from here at once.
   */
  async answerGate(gateId: string, body: unknown): Promise<Result<GateView>> {
    return toResult(async () => {
      const { record } = this.requireRun();
      const answer = parseOrThrow(GateAnswerBody, body, "gate.invalid_answer", "the gate answer");
      const gate = record.gates.find((candidate) => candidate.gate_id === gateId);
      if (!gate) {
        throw EngineError.terminal("gate.not_found", `no gate "${gateId}" in this run`);
      }
      if (gate.status !== "open") {
        throw EngineError.terminal(
          gate.status === "answered" ? "gate.answered" : "gate.expired",
          `gate ${gateId} is already ${gate.status}`,
        );
      }
      const problems = validateJson(
        gate.kind === "approval" ? APPROVAL_SCHEMA : gate.input_schema,
        answer.response,
        "response",
      );
      if (problems.length > 0) {
        throw EngineError.terminal(
          "gate.invalid_response",
          `the response does not match the gate's input_schema`,
          problems,
        );
      }
      await this.applyAndWake([
        {
          type: "gate_answer",
          gate_id: gateId,
          response: answer.response as Json,
          responder: answer.responder ?? null,
        },
      ]);
      const answered = this.requireRun().record.gates.find((candidate) => candidate.gate_id === gateId);
      return toGateView(answered ?? gate);
    });
  }

  /** A child run reports that it ended (it retries until this returns). */
  async childFinished(notification: unknown): Promise<Result<{ accepted: boolean }>> {
    return toResult(async () => {
      const outcome = ChildNotification.parse(notification);
      if (!this.state) {
        return { accepted: false };
      }
      await this.applyAndWake([{ type: "child_finished", outcome }]);
      return { accepted: true };
    });
  }

  /** For tests: counters of executor calls per event. */
  async getStats(): Promise<CoordinatorStats> {
    return { ...this.stats };
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    this.selfWakeStreak = 0;
    await this.wake();
  }

  /**
   * A fresh event that fires due timers and dispatches ready work. Dispatches
   * happen only here, inside the event that entered, so each event makes at
   * most MAX_DISPATCHES_PER_EVENT executor calls (+1 to wake itself again).
   */
  async wake(self = false): Promise<void> {
    this.selfWakeStreak = self ? this.selfWakeStreak + 1 : 0;
    if (this.state) {
      await this.applyAndWake([]);
    }
  }

  /**
   * Applies `events`, then a wake, in the caller's event: only entry points
   * that are events of their own (an alarm, an RPC call into this object)
   * call this, so their dispatches count against their own budget.
   */
  private async applyAndWake(events: readonly RunEvent[]): Promise<void> {
    await this.mutex.run(async () => {
      this.selfWakePending = false;
      const batch = this.inbox.splice(0);
      try {
        // Results that were waiting go first; the wake sees their effects.
        await this.applyNow([...batch.map((item) => item.event), ...events, { type: "wake", live: [...this.live] }]);
        batch.forEach((item) => item.resolve());
      } catch (error) {
        batch.forEach((item) => item.reject(error));
        throw error;
      }
    });
  }

  // ─── Applying decisions ────────────────────────────────────────────────────

  /**
   * Commits the new run. An `auto` run is committed started (`queued`, with
   * its `run.status` entry) in the same transaction as `run.created`, and the
   * alarm is set first: a restart at any point leaves either no run or a run
   * that its alarm will dispatch, never one stranded in `drafting`.
   */
  private async initialize(request: CreateRunRequest): Promise<void> {
    const now = Date.now();
    const at = new Date(now).toISOString();
    let state = newRunState(request, now);
    const unsigned: UnsignedEntry[] = [
      {
        seq: 1,
        kind: "run.created",
        at,
        body: {
          workflow: state.record.workflow,
          mode: request.mode,
          input: request.input,
          idempotency_key: request.idempotency_key,
        },
      },
    ];
    // Issued before the commit (writes land in order), awaited after it.
    const armed = request.mode === "auto" ? this.setAlarm(now + WAKE_BACKSTOP_MS) : null;
    if (request.mode === "auto") {
      const started = decide(state, { type: "start" }, { snapshot: request.snapshot, now, random: Math.random });
      state = started.state;
      unsigned.push(...journalOf(started.commands, at));
    }
    this.lastHash = null; // The chain starts here, whatever an earlier failed attempt signed.
    try {
      const entries = await this.sign(state.record.run_id, unsigned);
      this.ctx.storage.transactionSync(() => {
        this.store.create(state, request.snapshot);
        this.store.appendJournal(entries);
      });
    } catch (error) {
      this.lastHash = null;
      throw error;
    } finally {
      await armed;
    }
    this.state = state;
    this.snapshot = request.snapshot;
  }

  /**
   * Applies an event. Events that arrive while another is being applied wait
   * in the inbox and are then applied together, in arrival order, in one
   * storage transaction (a group commit: a burst of results costs one write).
   */
  private apply(event: RunEvent): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.inbox.push({ event, resolve, reject });
      // While other tasks are in flight their results tend to arrive in bursts:
      // waiting a moment lets one commit carry the whole burst.
      const gather = event.type === "task_result" && this.live.size > 0 ? GROUP_COMMIT_WINDOW_MS : 0;
      if (gather === 0) {
        void this.mutex.run(() => this.applyInbox());
      } else if (!this.gathering) {
        // One timer per window, not one per result: it applies whatever the inbox holds by then.
        this.gathering = true;
        setTimeout(() => {
          this.gathering = false;
          void this.mutex.run(() => this.applyInbox());
        }, gather);
      }
    });
  }

  private async applyInbox(): Promise<void> {
    const batch = this.inbox.splice(0, MAX_EVENTS_PER_BATCH);
    if (batch.length === 0) {
      return; // An earlier turn already applied these events.
    }
    try {
      await this.applyNow(batch.map((item) => item.event));
      for (const item of batch) {
        item.resolve();
      }
    } catch (error) {
      for (const item of batch) {
        item.reject(error);
      }
    }
    if (this.inbox.length > 0 && !this.gathering) {
      void this.mutex.run(() => this.applyInbox()); // More than one batch was waiting.
    }
  }

  private async applyNow(events: readonly RunEvent[]): Promise<void> {
    const { state: before, snapshot } = this;
    if (!before || !snapshot) {
      return;
    }
    const now = Date.now();
    let state = before;
    let wakeAt: number | null = null;
    const commands: Command[] = [];
    for (const event of coalesceResults(events)) {
      const decision = decide(state, event, { snapshot, now, random: Math.random });
      state = decision.state;
      wakeAt = decision.wakeAt;
      commands.push(...decision.commands);
    }
    const journal = journalOf(commands, new Date(now).toISOString());
    const payloads = commands.flatMap((command) => (command.kind === "dispatch" ? [command.payload] : []));
    const groups = chunk(payloads, TASKS_PER_EXECUTOR_CALL);
    this.countEvent(events.length, groups, commands);
    // The alarm is written before the commit: should this instance die right after it,
    // the alarm already covers what it makes outstanding (a wake due now gets the
    // self-wake's backstop). Issued now, awaited once the work is sent: storage writes
    // land in order, so it is durable no later than the state that needs it.
    const armed = wakeAt === null ? null : this.setAlarm(wakeAt <= now ? now + WAKE_BACKSTOP_MS : wakeAt);
    let entries: JournalEntry[];
    try {
      entries =
        groups.length >= DEFER_SIGNING_MIN_CALLS && payloads.some(waitsOnIo)
          ? await this.commitSendSign(before, state, journal, groups)
          : await this.signCommitSend(before, state, journal, groups);
    } finally {
      await armed;
    }
    this.perform(commands, entries.at(-1));
    await this.scheduleWake(wakeAt, now);
  }

  /**
   * The usual order: sign the decision's journal entries, commit them with the
   * state in one transaction, then send the work. Entries an earlier wave left
   * unsigned (its signing failed) go first.
   */
  private async signCommitSend(
    before: RunState,
    state: RunState,
    journal: readonly UnsignedEntry[],
    groups: readonly TaskPayload[][],
  ): Promise<JournalEntry[]> {
    const pending = this.unsigned;
    const entries = await this.sign(before.record.run_id, [...pending, ...journal]);
    this.ctx.storage.transactionSync(() => {
      this.store.save(before, state);
      if (pending.length > 0) {
        this.store.appendSigned(entries);
      } else {
        this.store.appendJournal(entries);
      }
    });
    this.state = state;
    this.unsigned = [];
    if (entries.length > 0) {
      this.wakeJournalWaiters();
    }
    for (const group of groups) {
      this.dispatchGroup(group);
    }
    return entries;
  }

  /**
   * A wide wave of I/O tasks: commit the decision with its entries unsigned,
   * send the work, and sign while it runs. Signing a hundred entries first
   * would hold every task back by that long; a restart in between signs them
   * on load (Ed25519 is deterministic: the same entries).
   */
  private async commitSendSign(
    before: RunState,
    state: RunState,
    journal: readonly UnsignedEntry[],
    groups: readonly TaskPayload[][],
  ): Promise<JournalEntry[]> {
    this.ctx.storage.transactionSync(() => {
      this.store.save(before, state);
      this.store.putUnsigned(journal);
    });
    this.state = state;
    this.unsigned.push(...journal);
    for (const group of groups) {
      this.dispatchGroup(group);
    }
    await new Promise((resolve) => setTimeout(resolve, 0)); // let the executor calls start first
    return this.signUnsigned();
  }

  /** Counters for tests: executor calls, tasks and child starts of one event. */
  private countEvent(events: number, groups: readonly TaskPayload[][], commands: readonly Command[]): void {
    this.stats.events += events;
    this.stats.maxDispatchesPerEvent = Math.max(this.stats.maxDispatchesPerEvent, groups.length);
    this.stats.maxTasksPerEvent = Math.max(
      this.stats.maxTasksPerEvent,
      groups.reduce((sum, group) => sum + group.length, 0),
    );
    this.stats.maxTasksPerCall = Math.max(this.stats.maxTasksPerCall, ...groups.map((group) => group.length), 0);
    this.stats.maxChildStartsPerEvent = Math.max(
      this.stats.maxChildStartsPerEvent,
      commands.filter((command) => command.kind === "start_child").length,
    );
    const cleanupCalls = commands.reduce(
      (sum, command) =>
        sum +
        (command.kind === "cancel_children"
          ? command.keys.length
          : command.kind === "release_resources"
            ? command.containers.length
            : 0),
      0,
    );
    this.stats.maxCleanupCallsPerEvent = Math.max(this.stats.maxCleanupCallsPerEvent, cleanupCalls);
  }

  /** The commands other than journal entries and dispatches, after the commit. */
  private perform(commands: readonly Command[], lastEntry: JournalEntry | undefined): void {
    for (const command of commands) {
      if (command.kind === "release_resources") {
        this.ctx.waitUntil(this.releaseContainers(command.containers));
      } else if (command.kind === "start_child") {
        this.ctx.waitUntil(this.startChild(command));
      } else if (command.kind === "cancel_children") {
        this.ctx.waitUntil(this.cancelChildren(command.keys));
      } else if (command.kind === "notify_parent") {
        const attestation =
          lastEntry?.kind === "attest" ? { seq: lastEntry.seq, hash: lastEntry.hash } : this.attestation();
        this.ctx.waitUntil(this.notifyParent(command, attestation));
      }
    }
  }

  /**
   * Work that is ready now gets a fresh event at once: a call to this
   * object's own `wake()` (an alarm would add its scheduling latency to every
   * dispatch wave). The alarm stays set as the backstop.
   */
  private async scheduleWake(wakeAt: number | null, now: number): Promise<void> {
    if (wakeAt !== null && wakeAt <= now) {
      if (this.selfWakePending) {
        return; // One wake in flight serves everything that became ready meanwhile.
      }
      if (this.selfWakeStreak >= MAX_SELF_WAKE_STREAK) {
        // Each self-call is a subrequest of the event that made it, and the platform
        // caps how deep subrequests nest; an alarm is a fresh top-level event.
        await this.setAlarm(now);
        return;
      }
      this.selfWakePending = true; // its backstop alarm was set before the commit
      const self = this.env.COORDINATOR.get(this.ctx.id) as unknown as { wake(self: boolean): Promise<void> };
      this.ctx.waitUntil(
        self
          .wake(true)
          .catch((error: unknown) =>
            console.error(JSON.stringify({ msg: "self-wake failed", error: ensureEngineError(error).message })),
          ),
      );
      return;
    }
    if (wakeAt === null) {
      await this.setAlarm(null); // set before the commit otherwise
    }
  }

  /** Signs journal entries in order, chained to the last one signed. */
  private async sign(runId: string, unsigned: readonly UnsignedEntry[]): Promise<JournalEntry[]> {
    if (unsigned.length === 0) {
      return [];
    }
    const key = await this.key();
    const entries: JournalEntry[] = [];
    let prev = this.lastHash;
    for (const { seq, kind, at, body } of unsigned) {
      const entry = await signEntry(key, { seq, run_id: runId, kind, at, body, prev });
      entries.push(entry);
      prev = entry.hash;
    }
    this.lastHash = prev;
    return entries;
  }

  /**
   * Signs the entries a wide dispatch wave left unsigned (or a restart found
   * unsigned) and appends them to the journal.
   */
  private async signUnsigned(): Promise<JournalEntry[]> {
    const runId = this.state?.record.run_id;
    const pending = this.unsigned;
    if (runId === undefined || pending.length === 0) {
      return [];
    }
    const entries = await this.sign(runId, pending);
    this.ctx.storage.transactionSync(() => this.store.appendSigned(entries));
    this.unsigned = this.unsigned.slice(pending.length);
    this.wakeJournalWaiters();
    return entries;
  }

  private key(): Promise<JournalSigningKey> {
    this.signingKey ??= importSigningKey(this.env.JOURNAL_SIGNING_KEY ?? "");
    return this.signingKey;
  }

  /**
   * Sends a group of tasks to the executor in one call and applies each
   * result as an event of its own as it streams back. The call is not awaited
   * by the event that made it: a pending service-binding call keeps this
   * object alive (compatibility date ≥ 2026-10-01). A task whose result never
   * arrives (the stream broke) gets a retryable `executor.unavailable`.
   */
  private dispatchGroup(payloads: readonly TaskPayload[]): void {
    for (const payload of payloads) {
      this.live.add(payload.token_id);
    }
    this.stats.dispatches += payloads.length;
    const deliver = (result: TaskResult): Promise<void> => {
      this.live.delete(result.token_id);
      return this.apply({ type: "task_result", result }).catch((thrown: unknown) => {
        console.error(
          JSON.stringify({
            msg: "applying a task result failed",
            token: result.token_id,
            error: ensureEngineError(thrown).message,
          }),
        );
      });
    };
    const call = sendTaskGroup(this.env.EXECUTOR, payloads, deliver);
    this.ctx.waitUntil(call);
  }

  /** Peers a run talks to about its children and its parent. */
  private peers(): RunPeers {
    return {
      catalog: () =>
        this.env.CATALOG.get(this.env.CATALOG.idFromName("catalog")) as unknown as Pick<Catalog, "resolveRun">,
      run: (runId) => this.env.COORDINATOR.get(this.env.COORDINATOR.idFromName(runId)) as unknown as RunPeer,
    };
  }

  private async startChild(command: Extract<Command, { kind: "start_child" }>): Promise<void> {
    const runId = this.state?.record.run_id;
    if (runId === undefined || this.live.has(command.key)) {
      return;
    }
    // While starting, the key is live: a wake meanwhile must not ask for the child again.
    this.live.add(command.key);
    try {
      await this.apply(await startChildRun(this.peers(), runId, command));
    } finally {
      this.live.delete(command.key);
    }
  }

  private async notifyParent(
    command: Extract<Command, { kind: "notify_parent" }>,
    attestation: { seq: number; hash: string } | null,
  ): Promise<void> {
    // While the report is in flight, a wake (one that sends cleanup right after the end) does not send another.
    this.live.add(NOTIFY_MARKER);
    try {
      if (await notifyParentRun(this.peers(), this.state?.record.run_id ?? null, command, attestation)) {
        await this.apply({ type: "parent_notified" });
      }
    } finally {
      this.live.delete(NOTIFY_MARKER);
    }
  }

  /**
   * Cancels child runs. Those that confirmed (or had ended, or never existed)
   * leave `pending_cancels`; the others stay, and a later wake sends them
   * again. The keys are live until the confirmation is applied, so no wake
   * meanwhile sends them twice.
   */
  private async cancelChildren(keys: readonly string[]): Promise<void> {
    const markers = keys.map(cancelMarker);
    markers.forEach((marker) => this.live.add(marker));
    try {
      const confirmed = await cancelChildRuns(this.peers(), keys);
      if (confirmed.length > 0) {
        await this.apply({ type: "children_cancelled", keys: confirmed });
      }
    } catch (error) {
      console.error(
        JSON.stringify({
          msg: "recording cancelled children failed; a wake sends the cancels again",
          error: ensureEngineError(error).message,
        }),
      );
    } finally {
      markers.forEach((marker) => this.live.delete(marker));
    }
  }

  /** The attestation that closes this run's journal, if it has one. */
  private attestation(): { seq: number; hash: string } | null {
    const last = this.store.journal(Math.max(0, (this.state?.record.journal_seq ?? 1) - 1), 1)[0];
    return last?.kind === "attest" ? { seq: last.seq, hash: last.hash } : null;
  }

  /**
   * Stops the run's containers (`release()` is idempotent: a container that
   * is already gone answers too). Those that answered leave
   * `pending_releases`; a failed call stays, and a later wake sends it again.
   */
  private async releaseContainers(names: readonly string[]): Promise<void> {
    const sandbox = this.env.SANDBOX;
    const markers = names.map(releaseMarker);
    markers.forEach((marker) => this.live.add(marker));
    try {
      const answered = await Promise.all(
        names.map(async (name) => {
          if (!sandbox) {
            return name; // No containers in this deployment: nothing to stop.
          }
          try {
            await sandbox.get(sandbox.idFromName(name)).release();
            return name;
          } catch (error) {
            console.error(
              JSON.stringify({
                msg: "releasing a container failed; a wake tries again",
                container: name,
                error: ensureEngineError(error).message,
              }),
            );
            return null;
          }
        }),
      );
      const released = answered.filter((name): name is string => name !== null);
      if (released.length > 0) {
        await this.apply({ type: "containers_released", containers: released });
      }
    } catch (error) {
      console.error(
        JSON.stringify({
          msg: "recording released containers failed; a wake releases them again",
          error: ensureEngineError(error).message,
        }),
      );
    } finally {
      markers.forEach((marker) => this.live.delete(marker));
    }
  }

  private wakeJournalWaiters(): void {
    const waiters = [...this.journalWaiters];
    this.journalWaiters.clear();
    for (const wake of waiters) {
      wake();
    }
  }

  /**
   * Keeps the one alarm at or before the next timer. The alarm is only ever
   * moved earlier (or set when there is none): an alarm that fires with
   * nothing due just sets the next one, while moving it on every event would
   * cost a storage write per result. `null` (the run ended) clears it.
   */
  private async setAlarm(at: number | null): Promise<void> {
    if (at === null) {
      if (this.alarmAt !== null) {
        this.alarmAt = null;
        await this.ctx.storage.deleteAlarm();
      }
      return;
    }
    if (this.alarmAt !== null && this.alarmAt <= at) {
      return;
    }
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  private requireRun(): RunState {
    if (!this.state) {
      throw EngineError.terminal("run.not_found", "no such run");
    }
    return this.state;
  }

  private summary(): CreateRunOutcome["run"] {
    const { record } = this.requireRun();
    return { run_id: record.run_id, status: record.status, workflow: record.workflow };
  }

  private view(): RunView {
    const state = this.requireRun();
    const nodes = this.snapshot?.workflow.definition.nodes ?? {};
    const foreach = new Set(
      Object.entries(nodes)
        .filter(([, node]) => node.foreach)
        .map(([id]) => id),
    );
    return toRunView(state, foreach);
  }
}

/**
 * Runs of consecutive task results become one `task_results` event: the same
 * outcome as applying them one by one, with one settling pass instead of one
 * per result (a burst of a hundred results is one pass, not a hundred).
 */
function coalesceResults(events: readonly RunEvent[]): RunEvent[] {
  const out: RunEvent[] = [];
  for (const event of events) {
    const last = out.at(-1);
    if (event.type === "task_result" && last?.type === "task_results") {
      out[out.length - 1] = { type: "task_results", results: [...last.results, event.result] };
    } else if (event.type === "task_result") {
      out.push({ type: "task_results", results: [event.result] });
    } else {
      out.push(event);
    }
  }
  return out;
}

/**
 * Whether a task may wait on something outside the executor (any step but a
 * pure `context` computation): while such tasks run the coordinator is idle,
 * and that is when their wave's entries are signed.
 */
function waitsOnIo(payload: TaskPayload): boolean {
  return payload.task.steps.some((step) => ACTION_TRAITS[step.action.kind].waitsOnIo);
}

/**
 * Work that a restart interrupts and a wake resumes: a start (a queued run, or
 * an auto run stored in drafting), dispatches in flight, children asked for
 * but not yet known to exist, and children to cancel or containers to release.
 */
function hasWorkToResume(state: RunState): boolean {
  const { status, mode } = state.record;
  if (status === "queued" || (status === "drafting" && mode === "auto") || hasPendingCleanup(state.record)) {
    return true;
  }
  return Object.values(state.nodes).some((node) =>
    node.invocations.some((invocation) => invocation.status === "running" || unstartedChild(invocation) !== null),
  );
}

/** The journal entries among a decision's commands, stamped with the event's time. */
function journalOf(commands: readonly Command[], at: string): UnsignedEntry[] {
  return commands.flatMap((command): UnsignedEntry[] =>
    command.kind === "journal" ? [{ seq: command.seq, kind: command.entryKind, at, body: command.body }] : [],
  );
}
