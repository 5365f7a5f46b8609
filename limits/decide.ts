import type {
  AcquireAnswer,
  AcquireRequest,
  LimitConfig,
  LimitStatus,
  ReleaseRequest,
  RenewRequest,
  WithdrawRequest,
} from "../schemas/limits.ts";

/**
 * The limit object's decisions, as plain functions of its state and the time:
 * who is granted a slot, who waits and in which order, what the sliding
 * windows hold, which leases have lapsed, which runs must hear of a grant,
 * and when to wake next. No storage, no calls, no clock: the object
 * (limits/keeper.ts) loads the state, asks, stores what changed and sends.
 *
 * Every function returns a new state and leaves the one it was given as it
 * was; what did not change keeps its identity (the store writes only rows
 * whose object changed).
 */

/** A window keeps at most about this many entries per period: uses close together share one (see {@link addUse}). */
export const WINDOW_BUCKETS = 256;
/** A grant notification being sent is due again this long after it was sent, should its answer be lost. */
export const NOTICE_LEASE_MS = 30_000;
/** The first retry of a notification that failed comes this long after the failure… */
export const NOTICE_RETRY_BASE_MS = 1_000;
/** …doubling with each failure, up to this. */
export const NOTICE_RETRY_MAX_MS = 300_000;
/** Holder ids whose release is remembered, so that a release sent twice counts its tokens once. */
export const REMEMBERED_RELEASES = 64;

/** A slot held. */
export interface HeldSlot {
  id: string;
  run_id: string;
  priority: number;
  granted_at: number;
  /** When the slot lapses unless renewed; null: held until released or withdrawn (a run). */
  lease_until: number | null;
  /**
   * When the slot's use was counted in the `rate` window: at the grant for an
   * acquire that calls at once (and for a run), or, for a step served from the
   * queue, when its call acquires it (null until then: it holds one unit of the
   * rate meanwhile). So the window counts calls when they are made, however
   * long a served step takes to come back: calls are spaced at the peer.
   */
  used_at: number | null;
}

/** A place in the queue. */
export interface Waiter {
  id: string;
  run_id: string;
  priority: number;
  enqueued_at: number;
  /** The lease its grant will carry (null: a run's, held until released). */
  lease_ms: number | null;
  /** Arrival order: among equal priorities, the lower is served first. */
  seq: number;
}

/** Uses counted in a sliding window: `amount` grants (or tokens) at `at`. */
export interface WindowEntry {
  at: number;
  amount: number;
}

/** A waiter granted after its call answered: its run must be told (`limitGranted`). */
export interface GrantNotice {
  holder_id: string;
  run_id: string;
  lease_until: number | null;
  /** When it may be sent: at the grant, after a send's lease, or after a retry's backoff. */
  due_at: number;
  /** Sends that failed so far. */
  attempts: number;
}

export interface LimitState {
  /** The definition as last seen (the highest version an acquire brought); null before the first acquire. */
  config: LimitConfig | null;
  holders: readonly HeldSlot[];
  /** In serving order: highest priority first, then oldest. */
  waiters: readonly Waiter[];
  /** Grants within the `rate` period, oldest first (kept only with a `rate`). */
  rate: readonly WindowEntry[];
  /** Tokens reported within the `tokens` period, oldest first (kept only with `tokens`). */
  tokens: readonly WindowEntry[];
  /** No grant before this time (0: no pause). */
  paused_until: number;
  next_seq: number;
  notices: readonly GrantNotice[];
  /** The latest holder ids released, newest last. */
  released: readonly string[];
}

export function emptyState(): LimitState {
  return {
    config: null,
    holders: [],
    waiters: [],
    rate: [],
    tokens: [],
    paused_until: 0,
    next_seq: 1,
    notices: [],
    released: [],
  };
}

/** What a call answers, and the state after it. */
export interface Decision<T> {
  state: LimitState;
  answer: T;
}

/**
 * Brings the state to `now`: window entries older than their period are
 * dropped, lapsed leases reclaimed, and the queue served as far as it can be.
 */
export function settle(state: LimitState, now: number): LimitState {
  return serve(reclaim(pruneWindows(state, now), now), now);
}

/**
 * A holder asks for a slot. A holder that holds is granted again (its lease
 * renewed). One that waits keeps its place. A new one is granted when no one
 * waits and a grant is possible; otherwise, with `queue`, it takes its place
 * in the queue (by priority, then age), and without it nothing is recorded.
 */
export function acquire(initial: LimitState, request: AcquireRequest, now: number): Decision<AcquireAnswer> {
  const state = settle(adoptConfig(initial, request.config), now);
  const { holder } = request;
  const held = state.holders.find((slot) => slot.id === holder.id);
  if (held !== undefined) {
    const renewed = { ...held, lease_until: leaseEnd(request.lease_ms, now), used_at: held.used_at ?? now };
    const counted = held.used_at === null ? countUse(state, now) : state;
    return {
      state: withoutNotice({ ...counted, holders: replace(state.holders, held, renewed) }, holder.id),
      answer: { granted: true, lease_until: renewed.lease_until },
    };
  }
  const place = state.waiters.findIndex((waiter) => waiter.id === holder.id);
  if (place >= 0) {
    return { state, answer: { granted: false, position: place + 1, retry_at: blockedUntil(state, now) } };
  }
  if (state.waiters.length === 0 && canGrant(state, now)) {
    const granted = grant(state, { ...holder, lease_ms: request.lease_ms }, now, true);
    return { state: granted.state, answer: { granted: true, lease_until: granted.slot.lease_until } };
  }
  if (!request.queue) {
    return { state, answer: notGranted(state, 0, now) };
  }
  const waiter: Waiter = { ...holder, enqueued_at: now, lease_ms: request.lease_ms, seq: state.next_seq };
  const waiters = enqueue(state.waiters, waiter);
  const queued = { ...state, waiters, next_seq: state.next_seq + 1 };
  return { state: queued, answer: notGranted(queued, waiters.indexOf(waiter) + 1, now) };
}

/**
 * A holder gives its slot back (a second release changes nothing), reports
 * the tokens it spent (counted once per release of a holder), and with
 * `retry_after_ms` pauses every grant until then. The queue is then served.
 */
export function release(initial: LimitState, request: ReleaseRequest, now: number): Decision<{ released: boolean }> {
  let state = pruneWindows(initial, now);
  const held = state.holders.some((slot) => slot.id === request.holder_id);
  const repeated = !held && state.released.includes(request.holder_id);
  const tokens = state.config?.tokens;
  if (tokens !== undefined && request.tokens !== undefined && request.tokens > 0 && !repeated) {
    state = { ...state, tokens: addUse(state.tokens, now, request.tokens, tokens.period_ms) };
  }
  if (request.retry_after_ms !== undefined && request.retry_after_ms > 0) {
    state = { ...state, paused_until: Math.max(state.paused_until, now + request.retry_after_ms) };
  }
  if (held) {
    state = withoutNotice(
      free(state, (slot) => slot.id === request.holder_id),
      request.holder_id,
    );
    const others = state.released.filter((id) => id !== request.holder_id);
    state = { ...state, released: [...others, request.holder_id].slice(-REMEMBERED_RELEASES) };
  }
  return { state: settle(state, now), answer: { released: held } };
}

/** Extends the leases of the holders that still hold (a lapsed one is not granted again); answers those. */
export function renew(initial: LimitState, request: RenewRequest, now: number): Decision<{ held: string[] }> {
  const state = settle(initial, now);
  const wanted = new Set(request.holder_ids);
  const held: string[] = [];
  const holders = state.holders.map((slot) => {
    if (!wanted.has(slot.id)) {
      return slot;
    }
    held.push(slot.id);
    return slot.lease_until === null ? slot : { ...slot, lease_until: now + request.lease_ms };
  });
  return { state: held.length === 0 ? state : { ...state, holders }, answer: { held } };
}

/** A run gives up every slot it holds and every place it waits here (only `holder_ids`, when given). */
export function withdraw(
  initial: LimitState,
  request: WithdrawRequest,
  now: number,
): Decision<{ released: number; withdrawn: number }> {
  const ids = request.holder_ids === undefined ? undefined : new Set(request.holder_ids);
  const matches = (entry: { id: string; run_id: string }) =>
    entry.run_id === request.run_id && (ids === undefined || ids.has(entry.id));
  let state = pruneWindows(initial, now);
  const released = state.holders.filter(matches).length;
  const withdrawn = state.waiters.filter(matches).length;
  if (released > 0) {
    state = free(state, matches);
  }
  if (withdrawn > 0) {
    state = { ...state, waiters: state.waiters.filter((waiter) => !matches(waiter)) };
  }
  const held = new Set(state.holders.map((slot) => slot.id));
  if (state.notices.some((notice) => !held.has(notice.holder_id))) {
    state = { ...state, notices: state.notices.filter((notice) => held.has(notice.holder_id)) };
  }
  return { state: settle(state, now), answer: { released, withdrawn } };
}

/**
 * Drops the holders whose lease ended at or before `now`. One whose run was
 * never told of its grant (the notice still pending: its coordinator did not
 * answer in time) goes back to the queue, ahead of those of its priority, so
 * its run still hears of a grant later; the slot is freed meanwhile.
 */
export function reclaim(state: LimitState, now: number): LimitState {
  const lapsed = (slot: HeldSlot) => slot.lease_until !== null && slot.lease_until <= now;
  if (!state.holders.some(lapsed)) {
    return state;
  }
  const kept = state.holders.filter((slot) => !lapsed(slot));
  const ids = new Set(kept.map((slot) => slot.id));
  const unheard = new Set(state.notices.map((notice) => notice.holder_id));
  let waiters = state.waiters;
  for (const slot of state.holders) {
    if (lapsed(slot) && unheard.has(slot.id)) {
      waiters = requeue(waiters, slot);
    }
  }
  return { ...state, holders: kept, waiters, notices: state.notices.filter((notice) => ids.has(notice.holder_id)) };
}

/**
 * Grants waiters strictly in order (highest priority, then oldest) while a
 * grant is possible: the first that cannot be granted blocks every one behind
 * it. Each one granted gets a notice to send to its run.
 */
export function serve(initial: LimitState, now: number): LimitState {
  let state = initial;
  for (let head = state.waiters[0]; head !== undefined && canGrant(state, now); head = state.waiters[0]) {
    // A step served from the queue counts its use when its call acquires; a run, now (it starts now).
    const granted = grant({ ...state, waiters: state.waiters.slice(1) }, head, now, head.lease_ms === null);
    const notice: GrantNotice = {
      holder_id: head.id,
      run_id: head.run_id,
      lease_until: granted.slot.lease_until,
      due_at: now,
      attempts: 0,
    };
    state = { ...granted.state, notices: [...granted.state.notices, notice] };
  }
  return state;
}

/** Whether a new holder could be granted at `now` (the queue aside): a free slot, room in each window, no pause. */
export function canGrant(state: LimitState, now: number): boolean {
  const { config } = state;
  if (config === null || state.paused_until > now) {
    return false;
  }
  if (config.concurrency !== undefined && state.holders.length >= config.concurrency) {
    return false;
  }
  const full = (entries: readonly WindowEntry[], window: LimitConfig["rate"], pending: number) =>
    window !== undefined && usedIn(entries, window.period_ms, now) + pending >= window.limit;
  return !full(state.rate, config.rate, uncounted(state)) && !full(state.tokens, config.tokens, 0);
}

/**
 * When time alone lets a grant through (a window freeing room, a pause
 * ending), or null when it does not: nothing stops a grant, or a slot must
 * be released first (concurrency), which no clock brings.
 */
export function blockedUntil(state: LimitState, now: number): number | null {
  const { config } = state;
  if (config === null || canGrant(state, now)) {
    return null;
  }
  if (config.concurrency !== undefined && state.holders.length >= config.concurrency) {
    return null;
  }
  const times = [
    state.paused_until > now ? state.paused_until : null,
    config.rate === undefined
      ? null
      : roomAt(state.rate, { ...config.rate, limit: config.rate.limit - uncounted(state) }, now),
    config.tokens === undefined ? null : roomAt(state.tokens, config.tokens, now),
  ];
  const known = times.filter((time): time is number => time !== null);
  return known.length === 0 ? null : Math.max(...known);
}

/**
 * When the object must wake: the first lease to lapse, the first notice due,
 * and, while someone waits, when a window or a pause lets the head through.
 */
export function nextAlarmAt(state: LimitState, now: number): number | null {
  const times: number[] = [];
  for (const slot of state.holders) {
    if (slot.lease_until !== null) {
      times.push(slot.lease_until);
    }
  }
  for (const notice of state.notices) {
    times.push(notice.due_at);
  }
  if (state.waiters.length > 0) {
    const until = blockedUntil(state, now);
    if (until !== null) {
      times.push(until);
    }
  }
  return times.length === 0 ? null : Math.min(...times);
}

// ─── Grant notifications ───────────────────────────────────────────────────────

/** The notices due at `now`, oldest grant first, at most `max`. */
export function noticesDue(state: LimitState, now: number, max: number): GrantNotice[] {
  return state.notices.filter((notice) => notice.due_at <= now).slice(0, max);
}

/** Notices being sent: due again when their lease ends, should the answer never come. */
export function leaseNotices(state: LimitState, holderIds: readonly string[], now: number): LimitState {
  const ids = new Set(holderIds);
  return {
    ...state,
    notices: state.notices.map((notice) =>
      ids.has(notice.holder_id) ? { ...notice, due_at: now + NOTICE_LEASE_MS } : notice,
    ),
  };
}

/** How a run answered a grant: it took it, it no longer wants it, or the call failed. */
export type NoticeOutcome = "accepted" | "declined" | "failed";

/**
 * Applies a run's answer to a notice: `accepted` forgets the notice,
 * `declined` frees the slot at once (and serves the next), `failed` tries
 * again after a backoff. A notice forgotten meanwhile (its holder released,
 * withdrawn or lapsed) changes nothing.
 */
export function settleNotice(state: LimitState, holderId: string, outcome: NoticeOutcome, now: number): LimitState {
  const notice = state.notices.find((entry) => entry.holder_id === holderId);
  if (notice === undefined) {
    return state;
  }
  if (outcome === "accepted") {
    return withoutNotice(state, holderId);
  }
  if (outcome === "declined") {
    return settle(
      withoutNotice(
        free(state, (slot) => slot.id === holderId),
        holderId,
      ),
      now,
    );
  }
  const attempts = notice.attempts + 1;
  const retried = { ...notice, attempts, due_at: noticeRetryAt(attempts, now) };
  return { ...state, notices: replace(state.notices, notice, retried) };
}

/** When a notice that failed `attempts` times (1 or more) may be sent again. */
export function noticeRetryAt(attempts: number, now: number): number {
  const delay = NOTICE_RETRY_BASE_MS * 2 ** Math.max(0, attempts - 1);
  return now + Math.min(delay, NOTICE_RETRY_MAX_MS);
}

// ─── Status ────────────────────────────────────────────────────────────────────

/**
 * `GET /v1/limits/{id}/status`: slots held, places waiting, the `tokens`
 * window when the limit has one (else the `rate` window), the `rate` window
 * too when it has both, and the pause. A window's `resets_at` is when every
 * use it counts now has left it (null when it counts none).
 */
export function toStatus(state: LimitState, limit: string, key: string, now: number): LimitStatus {
  const { config } = state;
  const rate = config?.rate === undefined ? undefined : windowStatus(state.rate, config.rate.period_ms, now);
  const tokens = config?.tokens === undefined ? undefined : windowStatus(state.tokens, config.tokens.period_ms, now);
  return {
    limit,
    key,
    in_use: state.holders.length,
    waiting: state.waiters.length,
    window: tokens ?? rate ?? { used: 0, resets_at: null },
    ...(tokens !== undefined && rate !== undefined ? { rate_window: rate } : {}),
    paused_until: state.paused_until > now ? new Date(state.paused_until).toISOString() : null,
  };
}

function windowStatus(entries: readonly WindowEntry[], periodMs: number, now: number) {
  const counted = entries.filter((entry) => entry.at > now - periodMs);
  const newest = counted.at(-1);
  return {
    used: counted.reduce((sum, entry) => sum + entry.amount, 0),
    resets_at: newest === undefined ? null : new Date(newest.at + periodMs).toISOString(),
  };
}

// ─── Windows ───────────────────────────────────────────────────────────────────

/**
 * Counts `amount` uses at `now`. A use within the same slice of the period
 * (1/{@link WINDOW_BUCKETS} of it) as the newest entry joins that entry, whose
 * time moves to `now`: a window holds at most about WINDOW_BUCKETS + 1
 * entries whatever its traffic, and a use leaves it at most one slice late,
 * never early. (A `rate` window also never holds more than `limit` uses.)
 */
export function addUse(entries: readonly WindowEntry[], now: number, amount: number, periodMs: number): WindowEntry[] {
  const slice = Math.max(1, Math.floor(periodMs / WINDOW_BUCKETS));
  const last = entries.at(-1);
  if (last !== undefined && Math.floor(last.at / slice) === Math.floor(now / slice)) {
    return [...entries.slice(0, -1), { at: Math.max(last.at, now), amount: last.amount + amount }];
  }
  return [...entries, { at: now, amount }];
}

/** The uses a window counts at `now`: those less than `periodMs` old. */
export function usedIn(entries: readonly WindowEntry[], periodMs: number, now: number): number {
  let used = 0;
  for (const entry of entries) {
    if (entry.at > now - periodMs) {
      used += entry.amount;
    }
  }
  return used;
}

/** When the window next has room (fewer uses than its limit), or null when it has room now. */
function roomAt(entries: readonly WindowEntry[], window: { limit: number; period_ms: number }, now: number) {
  let used = usedIn(entries, window.period_ms, now);
  if (used < window.limit) {
    return null;
  }
  for (const entry of entries) {
    if (entry.at > now - window.period_ms) {
      used -= entry.amount;
      if (used < window.limit) {
        return entry.at + window.period_ms;
      }
    }
  }
  return null;
}

/** Drops window entries that no longer count, and whole windows the limit no longer has. */
function pruneWindows(state: LimitState, now: number): LimitState {
  const prune = (entries: readonly WindowEntry[], periodMs: number | undefined) => {
    if (periodMs === undefined) {
      return entries.length === 0 ? entries : [];
    }
    const first = entries.findIndex((entry) => entry.at > now - periodMs);
    return first === 0 ? entries : first < 0 ? (entries.length === 0 ? entries : []) : entries.slice(first);
  };
  const rate = prune(state.rate, state.config?.rate?.period_ms);
  const tokens = prune(state.tokens, state.config?.tokens?.period_ms);
  return rate === state.rate && tokens === state.tokens ? state : { ...state, rate, tokens };
}

// ─── Helpers ───────────────────────────────────────────────────────────────────

/** The config of the highest version seen (a run started before a change still brings the older one). */
function adoptConfig(state: LimitState, config: LimitConfig): LimitState {
  if (state.config !== null && state.config.version > config.version) {
    return state;
  }
  if (state.config !== null && JSON.stringify(state.config) === JSON.stringify(config)) {
    return state;
  }
  return { ...state, config };
}

/** A new slot; its use counted in the `rate` window now when `counted`, else when its call acquires it. */
function grant(
  state: LimitState,
  holder: { id: string; run_id: string; priority: number; lease_ms: number | null },
  now: number,
  counted: boolean,
): { state: LimitState; slot: HeldSlot } {
  const slot: HeldSlot = {
    id: holder.id,
    run_id: holder.run_id,
    priority: holder.priority,
    granted_at: now,
    lease_until: leaseEnd(holder.lease_ms, now),
    used_at: counted ? now : null,
  };
  const added = { ...state, holders: [...state.holders, slot] };
  return { state: counted ? countUse(added, now) : added, slot };
}

/** One use counted in the `rate` window at `now` (nothing without a `rate`). */
function countUse(state: LimitState, now: number): LimitState {
  const rate = state.config?.rate;
  return rate === undefined ? state : { ...state, rate: addUse(state.rate, now, 1, rate.period_ms) };
}

/** Slots served from the queue whose call has not acquired them yet: each holds one unit of the `rate`. */
function uncounted(state: LimitState): number {
  let count = 0;
  for (const slot of state.holders) {
    count += slot.used_at === null ? 1 : 0;
  }
  return count;
}

function free(state: LimitState, matches: (slot: HeldSlot) => boolean): LimitState {
  return { ...state, holders: state.holders.filter((slot) => !matches(slot)) };
}

function withoutNotice(state: LimitState, holderId: string): LimitState {
  return state.notices.some((notice) => notice.holder_id === holderId)
    ? { ...state, notices: state.notices.filter((notice) => notice.holder_id !== holderId) }
    : state;
}

/** A granted holder back in the queue (seq 0): ahead of every waiter of its priority, behind those of a higher one. */
function requeue(waiters: readonly Waiter[], slot: HeldSlot): Waiter[] {
  const waiter: Waiter = {
    id: slot.id,
    run_id: slot.run_id,
    priority: slot.priority,
    enqueued_at: slot.granted_at,
    lease_ms: slot.lease_until === null ? null : Math.max(1, slot.lease_until - slot.granted_at),
    seq: 0,
  };
  const at = waiters.findIndex((other) => other.priority <= waiter.priority);
  return at < 0 ? [...waiters, waiter] : [...waiters.slice(0, at), waiter, ...waiters.slice(at)];
}

/** Places a waiter after every one of higher or equal priority (they came first). */
function enqueue(waiters: readonly Waiter[], waiter: Waiter): Waiter[] {
  const at = waiters.findIndex((other) => other.priority < waiter.priority);
  return at < 0 ? [...waiters, waiter] : [...waiters.slice(0, at), waiter, ...waiters.slice(at)];
}

function notGranted(state: LimitState, position: number, now: number): AcquireAnswer {
  return { granted: false, position, retry_at: blockedUntil(state, now) };
}

function leaseEnd(leaseMs: number | null, now: number): number | null {
  return leaseMs === null ? null : now + leaseMs;
}

function replace<T>(list: readonly T[], old: T, next: T): T[] {
  return list.map((entry) => (entry === old ? next : entry));
}
