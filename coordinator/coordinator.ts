import { DurableObject } from "cloudflare:workers";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { importSigningKey, signEntry, type JournalSigningKey } from "../lib/journal/index.ts";
import { validateJson } from "../lib/json-schema.ts";
import { toResult, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { TaskResult, type JournalEntry, type RunSnapshot, type RunStatus, type RunView, type TaskPayload } from "../schemas/index.ts";
import { decide, type Command, type RunEvent, type RunState } from "./decide.ts";
import { isTerminal } from "./lifecycle.ts";
import { CreateRunRequest, newRunState, type CreateRunOutcome } from "./create.ts";
import { RunStore } from "./storage.ts";
import { toRunView } from "./view.ts";

/** Journal entries returned by one events call. */
const EVENTS_PAGE = 500;
/** The longest a long poll for events waits. */
const MAX_EVENTS_WAIT_MS = 30_000;

/** What tests read to check the platform's per-event invocation cap. */
export interface CoordinatorStats {
  /** The most executor calls made within one Durable Object event. */
  maxDispatchesPerEvent: number;
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
  private signingKey: Promise<JournalSigningKey> | null = null;
  /** Tokens of the dispatches this instance is awaiting; any other running dispatch was lost. */
  private readonly live = new Set<string>();
  /** Events are applied one at a time, in arrival order. */
  private queue: Promise<void> = Promise.resolve();
  private alarmAt: number | null = null;
  /** Long polls waiting for the next journal entries. */
  private readonly journalWaiters = new Set<() => void>();
  private readonly stats: CoordinatorStats = { maxDispatchesPerEvent: 0, dispatches: 0, events: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new RunStore(ctx.storage.sql);
    void ctx.blockConcurrencyWhile(async () => {
      const loaded = this.store.load();
      if (loaded) {
        this.state = loaded.state;
        this.snapshot = loaded.snapshot;
        this.lastHash = loaded.lastHash;
        this.alarmAt = await ctx.storage.getAlarm();
        if (hasRunningDispatch(loaded.state)) {
          // A restart loses every dispatch in flight; wake now to re-dispatch them.
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
        if (this.state.record.request_hash !== parsed.request_hash) {
          throw EngineError.terminal("run.idempotency_conflict", "this idempotency_key was already used for a different request");
        }
        return { created: false, view: this.view() };
      }
      const problems = validateJson(parsed.snapshot.workflow.definition.input_schema, parsed.input, "input");
      if (problems.length > 0) {
        throw EngineError.terminal("run.invalid_input", `the run input does not match the workflow's input_schema`, problems);
      }
      await this.initialize(parsed);
      if (parsed.mode === "auto") {
        await this.apply({ type: "start" });
      }
      return { created: true, view: this.view() };
    });
  }

  async get(): Promise<Result<RunView>> {
    return toResult(() => this.view());
  }

  async journal(afterSeq?: number): Promise<Result<JournalEntry[]>> {
    return toResult(() => {
      this.requireRun();
      return this.store.journal(afterSeq ?? 0);
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
    return this.control({ type: "cancel", reason: reason ?? "cancelled by request" }, (status) => !isTerminal(status), "the run is already");
  }

  /** Stops new dispatches; what is in flight finishes. */
  async pause(): Promise<Result<RunView>> {
    return this.control({ type: "pause" }, (status) => status === "queued" || status === "running" || status === "waiting", "only a queued, running or waiting run can be paused; this one is");
  }

  async resume(): Promise<Result<RunView>> {
    return this.control({ type: "resume" }, (status) => status === "paused", "only a paused run can be resumed; this one is");
  }

  /** Re-runs a failed run from its failed nodes, keeping completed results, in the same journal. */
  async redrive(): Promise<Result<RunView>> {
    return this.control({ type: "redrive" }, (status) => status === "failed", "only a failed run can be redriven; this one is");
  }

  /** Starts a run created with `mode: "approval"`. */
  async approve(): Promise<Result<RunView>> {
    return this.control({ type: "start" }, (status) => status === "drafting", "only a run waiting in drafting can be approved; this one is");
  }

  /** Applies a control event when the run's status allows it, else a 409 `run.conflict`. */
  private async control(event: RunEvent, allowed: (status: RunStatus) => boolean, refusal: string): Promise<Result<RunView>> {
    return toResult(async () => {
      const { record } = this.requireRun();
      if (!allowed(record.status)) {
        const code = isTerminal(record.status) ? "run.terminal" : "run.conflict";
        throw EngineError.terminal(code, `${refusal} ${record.status}`);
      }
      await this.apply(event);
      return this.view();
    });
  }

  /** For tests: counters of executor calls per event. */
  async getStats(): Promise<CoordinatorStats> {
    return { ...this.stats };
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    if (this.state) {
      await this.apply({ type: "wake", live: [...this.live] });
    }
  }

  // ─── Applying decisions ────────────────────────────────────────────────────

  private async initialize(request: CreateRunRequest): Promise<void> {
    const now = Date.now();
    const state = newRunState(request, now);
    const entry = await this.sign(
      state.record.run_id,
      [{ kind: "journal", seq: 1, entryKind: "run.created", body: { workflow: state.record.workflow, mode: request.mode, input: request.input, idempotency_key: request.idempotency_key } }],
      now,
    );
    this.ctx.storage.transactionSync(() => {
      this.store.create(state, request.snapshot);
      this.store.appendJournal(entry);
    });
    this.state = state;
    this.snapshot = request.snapshot;
  }

  private apply(event: RunEvent): Promise<void> {
    const run = () => this.applyNow(event);
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async applyNow(event: RunEvent): Promise<void> {
    const { state, snapshot } = this;
    if (!state || !snapshot) {
      return;
    }
    const now = Date.now();
    const decision = decide(state, event, { snapshot, now, random: Math.random });
    const entries = await this.sign(state.record.run_id, decision.commands, now);
    this.ctx.storage.transactionSync(() => {
      this.store.save(state, decision.state);
      this.store.appendJournal(entries);
    });
    this.state = decision.state;
    this.stats.events += 1;
    if (entries.length > 0) {
      this.wakeJournalWaiters();
    }
    await this.setAlarm(decision.wakeAt);
    const dispatches = decision.commands.filter((command) => command.kind === "dispatch");
    this.stats.maxDispatchesPerEvent = Math.max(this.stats.maxDispatchesPerEvent, dispatches.length);
    for (const command of dispatches) {
      this.dispatch(command.payload);
    }
  }

  /** Signs the decision's journal entries, chained to the last one written. */
  private async sign(runId: string, commands: readonly Command[], now: number): Promise<JournalEntry[]> {
    const journal = commands.filter((command) => command.kind === "journal");
    if (journal.length === 0) {
      return [];
    }
    const key = await this.key();
    const at = new Date(now).toISOString();
    const entries: JournalEntry[] = [];
    let prev = this.lastHash;
    for (const command of journal) {
      const entry = await signEntry(key, { seq: command.seq, run_id: runId, kind: command.entryKind, at, body: command.body, prev });
      entries.push(entry as JournalEntry);
      prev = entry.hash;
    }
    this.lastHash = prev;
    return entries;
  }

  private key(): Promise<JournalSigningKey> {
    this.signingKey ??= importSigningKey(this.env.JOURNAL_SIGNING_KEY ?? "");
    return this.signingKey;
  }

  /**
   * Calls the executor and feeds its result back as an event. The call is
   * not awaited by the event that made it: a pending service-binding call
   * keeps this object alive (compatibility date ≥ 2026-10-01), and the result
   * is applied as an event of its own.
   */
  private dispatch(payload: TaskPayload): void {
    const token = payload.token_id;
    this.live.add(token);
    this.stats.dispatches += 1;
    const call = this.env.EXECUTOR.runTask(payload)
      .then((raw: unknown) => TaskResult.parse(raw))
      .catch((thrown: unknown) => executorFailure(token, thrown))
      .then((result) => {
        this.live.delete(token);
        return this.apply({ type: "task_result", result });
      })
      .catch((thrown: unknown) => {
        console.error(JSON.stringify({ msg: "applying a task result failed", token, error: ensureEngineError(thrown).message }));
      });
    this.ctx.waitUntil(call);
  }

  private wakeJournalWaiters(): void {
    const waiters = [...this.journalWaiters];
    this.journalWaiters.clear();
    for (const wake of waiters) {
      wake();
    }
  }

  private async setAlarm(at: number | null): Promise<void> {
    if (at === this.alarmAt) {
      return;
    }
    this.alarmAt = at;
    if (at === null) {
      await this.ctx.storage.deleteAlarm();
    } else {
      await this.ctx.storage.setAlarm(at);
    }
  }

  private requireRun(): RunState {
    if (!this.state) {
      throw EngineError.terminal("run.not_found", "no such run");
    }
    return this.state;
  }

  private view(): RunView {
    const state = this.requireRun();
    const nodes = this.snapshot?.workflow.definition.nodes ?? {};
    const foreach = new Set(Object.entries(nodes).filter(([, node]) => node.foreach).map(([id]) => id));
    return toRunView(state, foreach);
  }
}

function hasRunningDispatch(state: RunState): boolean {
  return Object.values(state.nodes).some((node) => node.invocations.some((invocation) => invocation.status === "running"));
}

/** The executor could not be reached or crashed: a retryable infrastructure failure. */
function executorFailure(token: string, thrown: unknown): TaskResult {
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return {
    token_id: token,
    success: false,
    error: { type: "executor.unavailable", step_ref: null, message: `the executor call failed: ${message}`, retryable: true, context_snapshot: null },
    metrics: { duration_ms: 0, steps_executed: 0, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
  };
}
