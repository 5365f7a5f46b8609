/**
 * The Worker: the HTTP API and the events queue's consumer as its default
 * export, and the classes that wrangler.toml names.
 */
import { createApp } from "./app.ts";
import { consumeEvents } from "./queue.ts";

const app = createApp();

export default {
  fetch: app.fetch,
  /** Messages of the events queue become events (src/queue.ts). */
  queue: consumeEvents,
} satisfies ExportedHandler<Env>;

/** One Durable Object per run: lifecycle, scheduling, timers, signed journal. */
export { Coordinator } from "../coordinator/coordinator.ts";
/** The definition catalog (SQLite). */
export { Catalog } from "../catalog/catalog.ts";
/** One event hub per event name (and shard): retained events, waits, deliveries. */
export { EventHub } from "../events/hub.ts";
/** One object per schedule: its alarm starts each slot's run. */
export { ScheduleHub } from "../schedules/hub.ts";
/** One limit object per (limit id, key): slots, sliding windows and the queue of waiters. */
export { LimitKeeper } from "../limits/keeper.ts";
/** The stateless executor entrypoint the coordinator dispatches tasks to. */
export { Executor } from "../executor/executor.ts";
/** The API over Workers RPC. */
export { TrellisApi } from "./rpc.ts";
/** One container per run and declared resource, running the shell server (docs/containers.md). */
export { Sandbox } from "../containers/index.ts";
