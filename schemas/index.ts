/**
 * The one contract: zod schemas of every definition, payload, record and API
 * body, with their inferred types. This folder imports only zod.
 */
export * from "./access.ts";
export * from "./actions.ts";
export * from "./api.ts";
export * from "./approvers.ts";
export * from "./auth.ts";
export * from "./common.ts";
export * from "./definitions.ts";
export * from "./errors.ts";
export * from "./events.ts";
export * from "./journal.ts";
export * from "./journal-bodies.ts";
export * from "./payload.ts";
export * from "./plans.ts";
export * from "./resolved.ts";
export * from "./run.ts";
export * from "./run-index.ts";
export * from "./retention.ts";
export * from "./sandbox.ts";
export * from "./schedules.ts";
export * from "./tools.ts";
export * from "./webhooks.ts";
export * from "./limits.ts";
export * from "./mcp.ts";
export * from "./telemetry.ts";
