/** The executor: what other folders may use. It never imports the coordinator. */
export { Executor } from "./executor.ts";
export { runTask, type RunTaskDeps } from "./run-task.ts";
