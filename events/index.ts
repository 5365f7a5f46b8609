/** External events: the event hubs and how events and waits are routed to them (docs/architecture.md, "Event routing"). */
export { EventHub, MAX_LOOKBACK_CHARS, MAX_LOOKBACK_EVENTS, type DeliveryTarget } from "./hub.ts";
export { checkMatch, isCandidate, matchVariables, MAX_WAIT_INPUT_BYTES, type EventVariable } from "./match.ts";
export {
  DELIVERY_LEASE_MS,
  MAX_DELIVERIES_PER_ROUND,
  planRound,
  retryAt,
  type PendingDelivery,
  type RoundPlan,
} from "./rounds.ts";
export {
  eventTriggers,
  acceptEvents,
  hubName,
  hubShards,
  MAX_EVENT_HUB_SHARDS,
  MAX_HUBS_PER_REQUEST,
  registerWait,
  sendEvents,
  shardOf,
  toEventList,
  unregisterWait,
  waitHub,
  type EventHubApi,
} from "./route.ts";
export { EVENT_RETENTION_MS, WAIT_GRACE_MS } from "./store.ts";
