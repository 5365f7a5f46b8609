/** The coordinator: what other folders may use. */
export { Coordinator, type CoordinatorStats } from "./coordinator.ts";
export { JOURNAL_PAGE } from "./storage.ts";
export type { CreateRunOutcome, CreateRunRequest } from "./create.ts";
export { decide, MAX_DISPATCHES_PER_EVENT, TASKS_PER_EXECUTOR_CALL, type RunEvent, type RunState } from "./decide.ts";
export { CONTROLS, RUN_CONTROLS, type RunControl } from "./controls.ts";
