/** Flow control across runs: one limit object per (limit id, key) (docs/architecture.md, "Limits"). */
// The LimitKeeper class itself (limits/keeper.ts) is exported by src/index.ts, as the other objects are.
export {
  acquire,
  addUse,
  blockedUntil,
  canGrant,
  emptyState,
  nextAlarmAt,
  NOTICE_LEASE_MS,
  noticeRetryAt,
  release,
  renew,
  settle,
  settleNotice,
  toStatus,
  usedIn,
  WINDOW_BUCKETS,
  withdraw,
  type GrantNotice,
  type HeldSlot,
  type LimitState,
  type Waiter,
  type WindowEntry,
} from "./decide.ts";
export { MAX_NOTICES_PER_ROUND, type LimitGrantTarget } from "./keeper.ts";
export { limitObject, type LimitKeeperApi } from "./route.ts";
export { limitObjectName, splitLimitObjectName } from "./names.ts";
