import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { EngineError } from "../lib/errors.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { By } from "../schemas/auth.ts";
import { toResult, type Result } from "../lib/result.ts";
import type { SignedEntryText } from "../lib/journal/index.ts";
import { EraseBody, MAX_START_WAIT_MS, type GateView, type RunView, type NodeDetail } from "../schemas/api.ts";
import { Answerer } from "../schemas/approvers.ts";
import type { JournalEntry } from "../schemas/journal.ts";
import type { TaskPayload, TaskResult } from "../schemas/payload.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import { ChildNotification, toGateView } from "./children.ts";
import { perform, type CommandDeps } from "./commands.ts";
import { assertAllowed, CONTROLS, isRunControl, type RunControl } from "./controls.ts";
import { assertErasable, erasedEntry, erasedRows, erasedState } from "./erase.ts";
import { eraseArchive } from "./erase-archive.ts";
import { toStepApproval } from "./standing-approvals.ts";
import { gateOfLink, toGateLink } from "./gate-links.ts";
import { chunk, dispatchGroup } from "./executor-client.ts";
import {
  decide,
  TASKS_PER_EXECUTOR_CALL,
  type Command,
  type DecideContext,
  type Decision,
  type RunEvent,
  type RunState,
} from "./decide.ts";
import { PURE_TASK_WORK_UNITS, runPureTasks } from "./pure-tasks.ts";
import { executeTask } from "../executor/execute.ts";
import { WorkBudget } from "../lib/expr/work-budget.ts";
import { newRunState, runCreatedEntry, type CreateRunOutcome, type CreateRunRequest } from "./create.ts";
import { coalesceResults, EventInbox } from "./inbox.ts";
import { toEventList } from "../events/route.ts";
import { EventDelivery, type DeliveryAnswer, type SendEventsResponse } from "../schemas/events.ts";
import { dataDigest } from "./event-digest.ts";
import { hasEventWait, toSignals } from "./event-delivery.ts";
import { JournalWaiters } from "./journal-waiters.ts";
import { isTerminal } from "./lifecycle.ts";
import { LiveSet, NOTHING_LIVE, toLiveWork } from "./live.ts";
import { assertSameRequest, assertValidInput, toGateAnswer } from "./requests.ts";
import { RunIndexSync } from "./run-index.ts";
import { TelemetryExport } from "./telemetry-export.ts";
import { otlpConfigOf } from "../telemetry/otlp.ts";
import { JournalSigner, journalOf } from "./signer.ts";
import { newStats, type CoordinatorStats } from "./stats.ts";
import { UsageMeter, type RunUsage } from "./usage.ts";
import { CallBudget } from "./call-budget.ts";
import { JOURNAL_PAGE, RunStore, type UnsignedEntry } from "./storage.ts";
import { toNodeDetail, toRunView, toStartSummary } from "./view.ts";
import { agentStepsOf } from "./agent-view.ts";
import { WakeScheduler } from "./wakes.ts";
import { LimitGrant, type LimitGrantAnswer } from "../schemas/limits.ts";
import { RunTombstone, type DeletedRun } from "../schemas/retention.ts";
import { deleteRun, deletionDueAt, deletionRefusal, retentionOf, TOMBSTONE_KEY } from "./retention.ts";
import { ensureEngineError } from "../lib/errors.ts";
import { releaseRunBlobs } from "../blobs/store.ts";
import { wantsLimitGrant } from "./wait-limits.ts";
import { RunBlobs } from "./run-blobs.ts";
import { resolveRefs } from "../blobs/offload.ts";
import { hasBlobRef } from "../blobs/ref.ts";
import { sensitivePaths } from "../blobs/sensitive.ts";
import type { BlobHolder } from "../blobs/store.ts";

export type { CoordinatorStats } from "./stats.ts";

/** A decision to commit: the state before it (null for a new run) and after, and what it does. */
interface Decided {
  before: RunState | null;
  state: RunState;
  snapshot: RunSnapshot;
  commands: readonly Command[];
  wakeAt: number | null;
  now: number;
  /** Entries that precede the commands' own (a new run's `run.created`), and the nodes replaced (absent: all). */
  lead: readonly UnsignedEntry[];
  changedNodes?: ReadonlySet<string>;
}

/** Journal entries returned by one events call. */
const EVENTS_PAGE = 500;
/** `settle`'s arguments, as they cross RPC. */
const SettleWait = z.strictObject({
  waitMs: z.number().int().min(0).max(MAX_START_WAIT_MS),
  asked: z.array(z.string()).max(1_000),
});

/**
 * One run: its lifecycle, schedule, timers and signed journal. This class
 * loads state, asks {@link decide} what to do, persists the decision and its
 * journal entries in one transaction, then performs the dispatches. It does
 * not decide anything itself, and its other concerns are modules of their
 * own: the signed journal (signer.ts), the alarm and self-wakes (wakes.ts),
 * the event inbox (inbox.ts), the work in flight (live.ts), the commands it
 * performs (commands.ts) and the run controls (controls.ts).
 */
export class Coordinator extends DurableObject<Env> {
  private readonly store: RunStore;
  private state: RunState | null = null;
  private snapshot: RunSnapshot | null = null;
  private readonly signer: JournalSigner;
  private readonly wakes: WakeScheduler;
  private readonly inbox: EventInbox;
  private readonly index: RunIndexSync;
  private readonly telemetry: TelemetryExport;
  /** What this instance has in flight (any other running dispatch or child start was lost). */
  private readonly live = new LiveSet();
  private readonly commandDeps: CommandDeps;
  /** Long polls waiting for the next journal entries. */
  private readonly journalWaiters = new JournalWaiters();
  private readonly stats: CoordinatorStats = newStats();
  /** What this object costs on the platform's meters (usage.ts): its storage and calls are counted through it. */
  private readonly usage = new UsageMeter();
  /** What is left of a deleted run (retention.ts): every call answers 410 `run.deleted`. */
  private tombstone: RunTombstone | null = null;
  /** The clock the retention deadline is checked against when the alarm fires; tests move it days ahead. */
  retentionClock: () => number = Date.now;
  /** The run's blobs: values entering it offloaded, and decisions reading blobs through a cache. */
  private readonly blobs: RunBlobs;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // With USAGE_METER=on (the bench), every storage call and every call out of this object goes through
    // the usage meter from here on. Off by default: its proxies cost about a tenth of a chain's time.
    if (env.USAGE_METER === "on") {
      this.ctx = ctx = this.usage.state(this.ctx);
      this.env = env = this.usage.env(env);
    }
    this.store = new RunStore(ctx.storage.sql);
    this.blobs = new RunBlobs(env);
    const waitUntil = (promise: Promise<unknown>) => ctx.waitUntil(promise);
    this.signer = new JournalSigner({
      storage: ctx.storage,
      store: this.store,
      secret: env.JOURNAL_SIGNING_KEY ?? "",
      onAppended: () => this.journalWaiters.release(),
    });
    this.wakes = new WakeScheduler({
      storage: ctx.storage,
      waitUntil,
      selfWake: () => (env.COORDINATOR.get(ctx.id) as unknown as { wake(self: boolean): Promise<void> }).wake(true),
      // The retention deadline too: a run kept for days keeps its alarm at the time it is deleted.
      heldUntil: (now) =>
        earliest(earliest(this.index.heldUntil(now), this.telemetry.heldUntil(now)), this.deletionAt()),
    });
    this.index = new RunIndexSync({ outbox: this.store, db: env.RUN_INDEX, waitUntil, wakes: this.wakes });
    this.telemetry = new TelemetryExport({
      config: otlpConfigOf(env),
      outbox: this.store,
      waitUntil,
      wakes: this.wakes,
    });
    this.inbox = new EventInbox(
      (events, budget) => this.applyNow(events, budget),
      () => this.live.isBusy(),
    );
    this.commandDeps = {
      env,
      live: this.live,
      waitUntil,
      apply: async (event) => {
        if (event.type === "event_registered" && this.state) {
          // Events the hubs kept refer to their large data: this run holds those blobs once it takes them.
          await this.blobs.hold(
            event.events.map((received) => received.event.data),
            this.holder(),
          );
        }
        return this.inbox.apply(event);
      },
      runId: () => this.state?.record.run_id ?? null,
      traceParent: () => this.state?.record.traceparent ?? null,
      attestation: () => this.attestation(),
    };
    void ctx.blockConcurrencyWhile(() => this.load());
  }

  private async load(): Promise<void> {
    const loaded = this.store.load();
    if (loaded) {
      this.state = loaded.state;
      this.snapshot = loaded.snapshot;
      this.blobs.notice(loaded.state);
      await this.signer.restore(loaded.state.record.run_id, loaded.lastHash);
      await this.wakes.restore(loaded.state);
      // A run that ended before its retention applied (or a deployment default changed) gets its deadline now.
      // Only ever a time: setAlarm(null) would clear the alarm the run's own timers need.
      const deletionAt = this.deletionAt();
      if (deletionAt !== null) {
        await this.wakes.setAlarm(deletionAt);
      }
      this.index.flush();
      this.telemetry.flush();
      return;
    }
    const tombstone = await this.ctx.storage.get(TOMBSTONE_KEY);
    this.tombstone = tombstone === undefined ? null : RunTombstone.parse(tombstone);
  }

  /**
   * Creates the run, or finds it (same id and request); given `waitMs`, answers once it ended or that long passed.
   * Only the engine calls this (the API, a plan, a parent run), with a request built from parsed bodies and a
   * snapshot the catalog resolved; the input is checked against the workflow here, where every run starts.
   */
  async create(request: CreateRunRequest, waitMs = 0): Promise<Result<CreateRunOutcome>> {
    return toResult(async () => {
      const created = this.state === null;
      this.assertNotDeleted();
      if (this.state) {
        const { record } = this.state;
        assertSameRequest(record, request);
        if (record.status === "drafting" && record.mode === "auto") {
          // Stored before creation and start were one transaction, and its start was lost.
          await this.applyAndWake([{ type: "start" }]);
        }
      } else {
        // A parent may pass blob references on: the input is checked as the values they stand for
        // (read only when there is a schema to check them against).
        const checked = request.snapshot.workflow.definition.input_schema !== undefined;
        const seen = checked && hasBlobRef(request.input) ? await resolveRefs(this.env, request.input) : request.input;
        assertValidInput(request.snapshot, seen);
        const holder = { runId: request.run_id, workflowId: request.snapshot.workflow.id };
        const sensitive = sensitivePaths(request.snapshot.workflow.definition.input_schema);
        const input = await this.blobs.intake(request.input, holder, sensitive);
        await this.initialize({ ...request, input }, new CallBudget());
      }
      await this.journalWaiters.until(() => isTerminal(this.requireRun().record.status), waitMs);
      return { created, run: toStartSummary(this.requireRun()) };
    });
  }

  async get(): Promise<Result<RunView>> {
    return toResult(() => this.view());
  }

  /**
   * The run view once the run has ended or has an open gate that `asked`
   * does not name, or after `waitMs` (at most MAX_START_WAIT_MS), whichever
   * comes first: how the MCP server follows a run it answers for
   * (src/mcp/follow.ts), one call however long it waits.
   */
  async settle(waitMs: number, asked: string[] = []): Promise<Result<RunView>> {
    return toResult(async () => {
      const wait = parseOrThrow(SettleWait, { waitMs, asked }, "request.invalid_argument", "the wait");
      const settled = (): boolean => {
        const { record } = this.requireRun();
        const open = record.gates.filter((gate) => gate.status === "open" && !wait.asked.includes(gate.gate_id));
        return isTerminal(record.status) || open.length > 0;
      };
      await this.journalWaiters.until(settled, wait.waitMs);
      return this.view();
    });
  }

  /** One node in full: its invocations, each with its dispatches' step records read from the journal. */
  async node(nodeId: string): Promise<Result<NodeDetail>> {
    return toResult(async () => {
      const state = this.requireRun();
      const node = Object.hasOwn(state.nodes, nodeId) ? state.nodes[nodeId] : undefined;
      if (node === undefined) {
        throw EngineError.terminal("node.not_found", `no node "${nodeId}" in this run`);
      }
      const entries: JournalEntry[] = [];
      for (let page = this.store.journal(0, JOURNAL_PAGE); page.length > 0;) {
        entries.push(...page);
        page = page.length < JOURNAL_PAGE ? [] : this.store.journal(page.at(-1)?.seq ?? 0, JOURNAL_PAGE);
      }
      const foreach = this.snapshot?.workflow.definition.nodes[nodeId]?.foreach !== undefined;
      const agentSteps = agentStepsOf(this.snapshot?.tasks[nodeId]);
      return await toNodeDetail(nodeId, node, foreach, entries, agentSteps);
    });
  }

  /** Journal entries after `afterSeq`, at most `limit` (≤ JOURNAL_PAGE) of them: a page. */
  async journal(afterSeq?: number, limit?: number): Promise<Result<JournalEntry[]>> {
    return toResult(() => {
      this.requireRun();
      return this.store.journal(afterSeq ?? 0, Math.max(1, Math.min(limit ?? JOURNAL_PAGE, JOURNAL_PAGE)));
    });
  }

  /** Journal entries after `afterSeq`, or up to `waitMs` for the next ones (a long poll for event streams). */
  async events(afterSeq: number, waitMs: number): Promise<Result<JournalEntry[]>> {
    return toResult(async () => {
      this.requireRun();
      const entries = this.store.journal(afterSeq, EVENTS_PAGE);
      if (entries.length > 0 || waitMs <= 0) {
        return entries;
      }
      await this.journalWaiters.wait(waitMs);
      return this.store.journal(afterSeq, EVENTS_PAGE);
    });
  }

  /** Cancels the run: no new dispatches, in-flight work abandoned, late results ignored. */
  async cancel(reason?: string): Promise<Result<RunView>> {
    return this.control("cancel", reason);
  }

  /**
   * Applies a run control (a row of coordinator/controls.ts) when the run
   * allows it, else a 409; `by` (who asked) is journaled on what it causes.
   */
  async control(name: RunControl, reason?: string, by?: unknown): Promise<Result<RunView>> {
    return toResult(async () => {
      const caller = parseBy(by);
      if (!isRunControl(name)) {
        throw EngineError.terminal("run.invalid_control", `no run control "${String(name)}"`);
      }
      if (reason !== undefined && typeof reason !== "string") {
        throw EngineError.terminal("run.invalid_reason", "a control's reason must be a string when given");
      }
      const { record } = this.requireRun();
      assertAllowed(name, record, this.snapshot?.workflow.definition);
      const row = CONTROLS[name];
      const event = row.event(reason, caller);
      await (row.wakes ? this.applyAndWake([event]) : this.inbox.apply(event));
      return this.view();
    });
  }

  /**
   * Erases the ended run's data (coordinator/erase.ts): its state without
   * inputs, outputs and answers, its journal rows without their sealed values,
   * and a signed `erased` entry after its attestation, in one transaction.
   * Alone (no event is applied meanwhile). A run erased already answers as it
   * is: nothing is erased twice, no second entry is written.
   */
  async erase(reason: unknown, by?: unknown): Promise<Result<RunView | DeletedRun>> {
    return toResult(() =>
      this.inbox.exclusive(async (): Promise<RunView | DeletedRun> => {
        const caller = parseBy(by);
        const body = parseOrThrow(EraseBody, { reason }, "request.invalid_body", "the erase body");
        if (this.tombstone?.archived) {
          return toDeletedRun(await this.eraseArchived(body.reason, caller));
        }
        const before = this.requireRun();
        if (before.record.erased !== undefined) {
          return this.view();
        }
        assertErasable(before.record);
        const runId = before.record.run_id;
        await this.signer.flush(runId);
        const blobs = await this.releaseBlobs(runId);
        const rows = erasedRows(this.store.sealedRows());
        const erasure = { at: Date.now(), by: caller, reason: body.reason, seqs: rows.map((row) => row.seq), blobs };
        const after = erasedState(before, erasure);
        const entry = erasedEntry(before.record, after.record.erased ?? erasure);
        const save = () => {
          this.store.save(before, after);
          this.store.rewriteJournal(rows);
        };
        const send = () => {
          this.state = after;
        };
        await this.signer.commit({ runId, journal: [entry], save, send }, []);
        this.index.flush();
        return this.view();
      }),
    );
  }

  /** Erases a deleted run's archived journal (erase-archive.ts) and keeps the erasure in its tombstone. */
  private async eraseArchived(reason: string, by: By | undefined): Promise<RunTombstone> {
    const tombstone = this.tombstone as RunTombstone;
    const bucket = this.env.BLOBS;
    const secret = this.env.JOURNAL_SIGNING_KEY ?? "";
    const erased = await eraseArchive(bucket, secret, tombstone.run_id, { at: Date.now(), by, reason });
    const after = { ...tombstone, erased };
    await this.ctx.storage.put(TOMBSTONE_KEY, after);
    this.tombstone = after;
    return after;
  }

  /**
   * Gives up the run's blobs as it is erased (blobs/store.ts): the digests
   * it held, whether deleted or kept for another run that holds them too.
   */
  private async releaseBlobs(runId: string): Promise<string[]> {
    const { deleted, kept } = await releaseRunBlobs(this.env, runId);
    return [...deleted, ...kept];
  }

  /** Standing approvals of plan steps (coordinator/standing-approvals.ts): `{ steps, responder }`. */
  async approveSteps(body: unknown): Promise<Result<RunView>> {
    return toResult(async () => {
      await this.applyAndWake([toStepApproval(this.requireRun().record, body)]);
      return this.view();
    });
  }

  /** The run's gates, open and closed. */
  async gates(): Promise<Result<GateView[]>> {
    return toResult(() => this.requireRun().record.gates.map(toGateView));
  }

  /**
   * Answers an open gate once, with an answer matching its `input_schema`, by a caller its
   * `approvers` name (`answerer`: who, checked by the API); the task resumes from here at once.
   */
  async answerGate(gateId: string, body: unknown, answerer: unknown): Promise<Result<GateView>> {
    return toResult(async () => {
      const who = parseOrThrow(Answerer, answerer, "request.invalid_argument", "answerer");
      const { gate, event } = toGateAnswer(this.requireRun().record.gates, gateId, body, who);
      await this.applyAndWake([{ ...event, response: await this.blobs.intake(event.response, this.holder()) }]);
      const answered = this.requireRun().record.gates.find((candidate) => candidate.gate_id === gateId);
      return toGateView(answered ?? gate);
    });
  }

  /**
   * Keeps an approval link of an open gate (coordinator/gate-links.ts); the API made its secret and sends its hash.
   * `made: false`: a request with `once` found the live link the same caller made for the same approver.
   */
  async linkGate(gateId: string, request: unknown): Promise<Result<{ expires_at: string; made: boolean }>> {
    return toResult(async () => {
      const event = toGateLink(this.requireRun().record, gateId, request, Date.now());
      if ("existing" in event) {
        return { expires_at: new Date(event.existing.expires_at).toISOString(), made: false };
      }
      await this.inbox.apply(event);
      return { expires_at: new Date(event.link.expires_at).toISOString(), made: true };
    });
  }

  /** The gate an approval link answers, and the approver it names, when `secret` is the link's (else 404, 409, 410). */
  async linkedGate(linkId: string, secret: string): Promise<Result<{ gate: GateView; approver: string }>> {
    return toResult(async () => {
      const { gate, link } = gateOfLink(this.requireRun().record, linkId, await secretHash(secret), Date.now());
      return { gate: toGateView(gate), approver: link.approver };
    });
  }

  /** Answers the gate of an approval link, as the link's approver; the link is used up. */
  async answerByLink(linkId: string, secret: string, body: unknown): Promise<Result<GateView>> {
    return toResult(async () => {
      const hash = await secretHash(secret);
      const { gate, link } = gateOfLink(this.requireRun().record, linkId, hash, Date.now());
      const answerer = { by: { link: linkId, approver: link.approver }, roles: [] };
      const { event } = toGateAnswer([gate], gate.gate_id, body, answerer);
      await this.applyAndWake([{ ...event, response: await this.blobs.intake(event.response, this.holder()) }]);
      const answered = this.requireRun().record.gates.find((candidate) => candidate.gate_id === gate.gate_id);
      if (
        !answered ||
        !(answered.answered_by && "link" in answered.answered_by && answered.answered_by.link === linkId)
      ) {
        // Another answer reached the gate first.
        throw EngineError.terminal("gate.answered", `gate ${gate.gate_id} is already answered`);
      }
      return toGateView(answered);
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

  /**
   * Signals to this run (`POST /v1/runs/{id}/signals`, the body of `POST /v1/events`):
   * each is taken by a waiting `event` step that it matches, or kept until one is or
   * the run ends. An id this run accepted before is a duplicate, accepted once.
   */
  async signal(body: unknown, by?: unknown): Promise<Result<SendEventsResponse>> {
    return toResult(async () => {
      const inputs = await Promise.all(
        toEventList(body).map(async (input) =>
          input.data === undefined ? input : { ...input, data: await this.blobs.intake(input.data, this.holder()) },
        ),
      );
      const events = await toSignals(this.requireRun().record, inputs, Date.now(), parseBy(by));
      await this.applyAndWake(events.filter((event) => event.type === "signal"));
      return { events: events.map(({ answer }) => answer) };
    });
  }

  /** An event hub delivers an event to one of this run's event waits; the hub forgets the wait unless `declined`. */
  async deliverEvent(delivery: unknown): Promise<Result<DeliveryAnswer>> {
    return toResult(async () => {
      const { wait_key: key, event: delivered } = EventDelivery.parse(delivery);
      if (!this.state || !hasEventWait(this.state.nodes, key)) {
        return { outcome: "not_waiting" as const };
      }
      const event = { ...delivered, data: await this.blobs.intake(delivered.data, this.holder()) };
      const received = { event, data_sha256: await dataDigest(event.data) };
      await this.applyAndWake([{ type: "event_delivered", key, received }]);
      return { outcome: hasEventWait(this.requireRun().nodes, key) ? ("declined" as const) : ("consumed" as const) };
    });
  }

  /**
   * A limit object served a holder of this run it had queued (limits/keeper.ts):
   * the step runs again, or the run starts. A holder the run no longer waits for
   * (its run ended, its wait closed) is answered `accepted: false`, and the
   * object gives the slot to the next.
   */
  async limitGranted(grant: unknown): Promise<Result<LimitGrantAnswer>> {
    return toResult(async () => {
      const { holder_id } = LimitGrant.parse(grant);
      if (!this.state || !wantsLimitGrant(this.state, holder_id)) {
        return { accepted: false };
      }
      await this.applyAndWake([{ type: "limit_granted", holder_id }]);
      return { accepted: true };
    });
  }

  /** For tests: counters of executor calls per event, the usage so far and when the run ended (usage.ts). */
  async getStats(): Promise<CoordinatorStats & { usage: RunUsage; usageAtEnd: RunUsage | null }> {
    return { ...this.stats, usage: this.usage.read(), usageAtEnd: this.usage.readAtEnd() };
  }

  override async alarm(): Promise<void> {
    this.usage.alarmFired();
    if (this.tombstone) {
      return;
    }
    this.wakes.alarmFired();
    const due = this.deletionAt();
    if (this.state && due !== null && due <= this.retentionClock()) {
      // A failure throws: the platform retries the alarm, and the run stays whole until a retry succeeds.
      await this.deleteNow("retention");
      return;
    }
    this.index.flush(); // the retry of a failed index write, or its backstop
    this.telemetry.flush(); // likewise for the spans not yet exported
    await this.wake();
  }

  /**
   * A fresh event that fires due timers and dispatches ready work. Dispatches
   * happen only here, inside the event that entered, so each event makes at
   * most MAX_DISPATCHES_PER_EVENT executor calls (+1 to wake itself again).
   */
  async wake(self = false): Promise<void> {
    this.wakes.wakeArrived(self);
    if (this.state) {
      await this.applyAndWake([]);
    }
  }

  /**
   * Applies `events`, then a wake, in the caller's event: only entry points that are events of their own (an
   * alarm, an RPC call into this object) call this, so their dispatches count against their own budget.
   */
  private async applyAndWake(events: readonly RunEvent[]): Promise<void> {
    const budget = new CallBudget();
    await this.inbox.applyAll(() => {
      this.wakes.wakeApplying();
      return [...events, { type: "wake", live: this.live.snapshot(), budget: budget.left() }];
    }, budget);
  }

  // ─── Applying decisions ────────────────────────────────────────────────────

  /**
   * Commits the new run. An `auto` run is committed started, with its first
   * wave dispatched, in the transaction that writes `run.created`, and the
   * alarm is set before it: a restart at any point leaves either no run or a
   * run that its alarm wakes (and that wake finds the lost dispatches).
   */
  private async initialize(request: CreateRunRequest, budget: CallBudget): Promise<void> {
    const now = Date.now();
    const initial = newRunState(request, now);
    const created = runCreatedEntry(initial.record, request, new Date(now).toISOString());
    const context = { snapshot: request.snapshot, now, random: Math.random };
    const wake = { type: "wake", live: NOTHING_LIVE, budget: budget.left() } as const;
    const { state, commands, wakeAt } =
      request.mode === "auto"
        ? await this.runPure(
            await this.blobs.decide(() => decide(initial, { type: "start" }, context, wake)),
            context,
            budget,
          )
        : { state: initial, commands: [], wakeAt: null };
    this.signer.startChain();
    await this.commit(
      { before: null, state, snapshot: request.snapshot, commands, wakeAt, now, lead: [created] },
      budget,
    );
  }

  /**
   * Applies a batch of events: decides and commits. Work the events made
   * ready is dispatched in the same commit, by a wake within what `budget`
   * (the calls of the event this batch runs in) has left: a chain's next node
   * leaves with its predecessor's result, not one self-wake and one commit later.
   */
  private async applyNow(events: readonly RunEvent[], budget: CallBudget | null): Promise<void> {
    const { state: before, snapshot } = this;
    if (!before || !snapshot) {
      return;
    }
    const now = Date.now();
    const context = { snapshot, now, random: Math.random };
    const batch = coalesceResults(events);
    const follow = events.some((event) => event.type === "wake") ? undefined : this.followingWake(budget);
    const decideBatch = (): Decision => {
      let state = before;
      let wakeAt: number | null = null;
      let workUnits = 0;
      const commands: Command[] = [];
      const changedNodes = new Set<string>();
      batch.forEach((event, index) => {
        const decision = decide(state, event, context, index === batch.length - 1 ? follow : undefined);
        ({ state, wakeAt } = decision);
        workUnits += decision.workUnits;
        commands.push(...decision.commands);
        decision.changedNodes.forEach((id) => changedNodes.add(id));
      });
      return { state, wakeAt, commands, changedNodes, workUnits };
    };
    // A run without blobs decides at once, as before (run-blobs.ts).
    const decided = this.blobs.active ? await this.blobs.decide(decideBatch) : decideBatch();
    this.stats.events += events.length;
    const settled = await this.runPure(decided, context, budget);
    await this.commit({ before, snapshot, now, lead: [], ...settled }, budget);
  }

  /**
   * Runs the pure tasks `decision` dispatched, here, and decides their
   * results (pure-tasks.ts): a chain of them advances without an executor
   * call or a commit per node, within what the event may spend on them.
   */
  private async runPure(decision: Decision, context: DecideContext, budget: CallBudget | null): Promise<Decision> {
    if (!decision.commands.some((command) => command.kind === "dispatch")) {
      return decision;
    }
    const pure = (budget ?? new CallBudget()).pure;
    const settled = await runPureTasks(decision, {
      budget: pure,
      run: async (payload) => {
        const work = new WorkBudget(PURE_TASK_WORK_UNITS, "task");
        const result = await executeTask(this.env, payload, work);
        pure.spend(work.spent);
        if (work.spent >= PURE_TASK_WORK_UNITS) {
          // Past its allowance here: the executor runs it, with its whole task budget.
          return null;
        }
        this.blobs.notice(result);
        this.stats.pureTasks += 1;
        return result;
      },
      decide: (state, results, pending) => {
        const follow = this.pureFollow(budget, pending);
        return this.blobs.decide(() => decide(state, { type: "task_results", results }, context, follow));
      },
    });
    this.stats.maxPureTasksPerEvent = Math.max(this.stats.maxPureTasksPerEvent, pure.taken);
    return settled;
  }

  /** The wake after pure tasks' results: the dispatches `pending` will send count as in flight and against the event's calls. */
  private pureFollow(budget: CallBudget | null, pending: readonly Command[]): RunEvent | undefined {
    const sending = pending.flatMap((command) => (command.kind === "dispatch" ? [command.payload.token_id] : []));
    const left = budget?.left();
    const executorCalls = (left?.executorCalls ?? 0) - Math.ceil(sending.length / TASKS_PER_EXECUTOR_CALL);
    if (left === undefined || executorCalls <= 0) {
      return undefined;
    }
    const tokens = [...this.live.tokens, ...this.inbox.queuedTokens(), ...sending];
    return {
      type: "wake",
      live: toLiveWork({ ...this.live, tokens }),
      budget: { executorCalls, otherCalls: left.otherCalls },
    };
  }

  /** The wake a batch's decision includes when it leaves work due now, within what the event's calls have left. */
  private followingWake(budget: CallBudget | null): RunEvent | undefined {
    if (!budget || budget.left().executorCalls <= 0) {
      return undefined;
    }
    // Results still in the inbox were delivered: their dispatches are not lost.
    const live = toLiveWork({ ...this.live, tokens: [...this.live.tokens, ...this.inbox.queuedTokens()] });
    return { type: "wake", live, budget: budget.left() };
  }

  /** Commits a decision with its journal entries, sends its work, performs its commands and schedules the next wake. */
  private async commit(decided: Decided, budget: CallBudget | null): Promise<void> {
    const { before, state, snapshot, commands, wakeAt, now } = decided;
    const payloads = commands.flatMap((command) => (command.kind === "dispatch" ? [command.payload] : []));
    const groups = chunk(payloads, TASKS_PER_EXECUTOR_CALL);
    (budget ?? new CallBudget()).spend(groups, commands, this.stats);
    // Issued before the commit, awaited once the work is sent (wakes.ts).
    const armed = this.wakes.arm(wakeAt, now);
    let entries: SignedEntryText[];
    try {
      const commit = {
        runId: state.record.run_id,
        journal: [...decided.lead, ...journalOf(commands, new Date(now).toISOString())],
        save: () =>
          before === null ? this.store.create(state, snapshot) : this.store.save(before, state, decided.changedNodes),
        send: () => {
          this.state = state;
          this.snapshot = snapshot;
          groups.forEach((group) => this.dispatchGroup(group, budget));
        },
      };
      entries = await this.signer.commit(commit, groups);
    } finally {
      await armed;
    }
    perform(commands, this.commandDeps, entries.at(-1));
    this.index.flush();
    this.telemetry.flush();
    await this.wakes.scheduleWake(wakeAt, now);
    this.usage.logIfEnded(before?.record.status ?? null, state.record);
  }

  /** Sends a group of tasks in one executor call; each result is applied in `budget`'s event as it streams back. */
  private dispatchGroup(payloads: readonly TaskPayload[], budget: CallBudget | null): void {
    this.stats.dispatches += payloads.length;
    const deliver = (result: TaskResult) => {
      this.blobs.notice(result);
      return this.inbox.apply({ type: "task_result", result }, budget);
    };
    this.ctx.waitUntil(dispatchGroup(this.env.EXECUTOR, this.live, payloads, deliver));
  }

  /** The latest attestation of this run's journal (a compensation section may follow it), if it has one. */
  private attestation(): { seq: number; hash: string } | null {
    const last = this.store.lastAttestation();
    return last ? { seq: last.seq, hash: last.hash } : null;
  }

  /**
   * Deletes the run now (`DELETE /v1/runs/{id}`, docs/api.md): a run that has
   * not ended is 409 `run.not_terminal`; a run already deleted answers as it is.
   */
  async deleteRun(): Promise<Result<DeletedRun>> {
    return toResult(async () => {
      if (this.tombstone) {
        return toDeletedRun(this.tombstone);
      }
      const { record } = this.requireRun();
      const refusal = deletionRefusal(record.status, record);
      if (refusal) {
        throw refusal;
      }
      return toDeletedRun(await this.deleteNow("operator"));
    });
  }

  /** When retention deletes the run (retention.ts), or null. */
  private deletionAt(): number | null {
    const record = this.state?.record;
    return record ? deletionDueAt(record, retentionOf(this.snapshot?.workflow.definition.retention, this.env)) : null;
  }

  /**
   * Deletes the run with every other event of the object held back, so that
   * nothing (a redrive, a signal) changes the run while it is archived and
   * deleted. The callback never throws: a throw would reset the object.
   */
  private async deleteNow(reason: RunTombstone["reason"]): Promise<RunTombstone> {
    const outcome = await this.ctx.blockConcurrencyWhile(async () => {
      try {
        return { tombstone: await this.deleteHeld(reason) };
      } catch (error) {
        return { error: ensureEngineError(error) };
      }
    });
    if ("error" in outcome) {
      throw outcome.error;
    }
    return outcome.tombstone;
  }

  private async deleteHeld(reason: RunTombstone["reason"]): Promise<RunTombstone> {
    if (this.tombstone) {
      return this.tombstone;
    }
    const { record } = this.requireRun();
    const refusal = deletionRefusal(record.status, record);
    if (refusal) {
      throw refusal;
    }
    const policy = retentionOf(this.snapshot?.workflow.definition.retention, this.env);
    const deps = {
      storage: this.ctx.storage,
      db: this.env.RUN_INDEX,
      bucket: this.env.BLOBS,
      journal: () => this.store.journal(0, Number.MAX_SAFE_INTEGER),
      releaseBlobs: (runId: string) => releaseRunBlobs(this.env, runId),
    };
    const tombstone = await deleteRun(deps, record, { archive: policy.archive, reason, now: Date.now() });
    this.state = null;
    this.snapshot = null;
    this.tombstone = tombstone;
    this.store.drop();
    this.journalWaiters.release();
    return tombstone;
  }

  /** A deleted run is gone: 410 `run.deleted`, saying when. */
  private assertNotDeleted(): void {
    if (this.tombstone) {
      const at = new Date(this.tombstone.deleted_at).toISOString();
      throw EngineError.terminal("run.deleted", `run ${this.tombstone.run_id} was deleted at ${at}`);
    }
  }

  /** This run, as the holder of the blobs its values are offloaded to. */
  private holder(): BlobHolder {
    const { record } = this.requireRun();
    return { runId: record.run_id, workflowId: record.workflow.id };
  }

  private requireRun(): RunState {
    this.assertNotDeleted();
    if (!this.state) {
      throw EngineError.terminal("run.not_found", "no such run");
    }
    return this.state;
  }

  private view(): RunView {
    return toRunView(this.requireRun(), this.snapshot);
  }
}

/** What `DELETE /v1/runs/{id}` answers of a tombstone. */
function toDeletedRun(tombstone: RunTombstone): DeletedRun {
  const { run_id, ended, reason, archived, erased } = tombstone;
  return {
    run_id,
    status: "deleted",
    ended,
    deleted_at: new Date(tombstone.deleted_at).toISOString(),
    reason,
    archived,
    ...(erased === undefined ? {} : { erased: { ...erased, at: new Date(erased.at).toISOString() } }),
  };
}

/** The earlier of two alarm times, either of which may be absent. */
function earliest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b);
}

/** The SHA-256 of an approval link's secret, as the run keeps it. */
async function secretHash(secret: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)));
}

/** Who a caller says caused a call (`by`, schemas/auth.ts), parsed at this boundary; absent when not given. */
function parseBy(by: unknown): By | undefined {
  return by === undefined ? undefined : parseOrThrow(By, by, "request.invalid_argument", "by");
}
