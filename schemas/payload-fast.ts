import { firstNonJson } from "./common.ts";
import {
  RETRY_REASONS,
  type CallAttempt,
  type StepRecord,
  type TaskMetrics,
  type TaskPayload,
  type TaskResult,
} from "./payload.ts";

/**
 * Exact fast paths for the two values that cross the executor boundary on
 * every dispatch: a task group (its tasks aside, task-check.ts checks those)
 * and a task result. Each accepts only values its zod schema accepts, and
 * hands them back as they are (the schema would return an equal copy);
 * everything else, rarer shapes included (a resumed task, a failure, an
 * undo), returns null, and the caller parses it with the schema, which says
 * what is wrong. Without code generation (workerd forbids it) zod reads an
 * object a field at a time, which cost a 200-node chain ~7% of its time
 * (measured with `npm run bench:ab`). `test/workers/payload-fast.test.ts`
 * holds each to its schema on generated values.
 */

type Fields = Record<string, unknown>;

/** A payload of a task group as it arrives: a task payload that names its task by `task_key`. */
export function fastPayloadEnvelope(value: unknown): Omit<TaskPayload, "task"> | null {
  if (!isRecord(value) || !onlyKeys(value, GROUP_PAYLOAD_KEYS)) {
    return null;
  }
  const ok =
    isName(value.token_id) &&
    isName(value.workflow_run_id) &&
    isName(value.workflow_id) &&
    isCount(value.workflow_version, 0) &&
    (value.parent_run_id === undefined || isName(value.parent_run_id)) &&
    isName(value.node_id) &&
    (value.item_index === null || isCount(value.item_index, 0)) &&
    isCount(value.iteration, 1) &&
    isName(value.task_id) &&
    isCount(value.task_version, 0) &&
    typeof value.task_key === "string" &&
    value.input !== undefined &&
    firstNonJson(value.input) === null &&
    isRecord(value.resources) &&
    Object.keys(value.resources).length === 0 &&
    isCount(value.timeout_ms, 1) &&
    isCount(value.retry_attempt, 0) &&
    Array.isArray(value.tools) &&
    everyItem(value.tools, (tool) => typeof tool === "string") &&
    value.resume === undefined;
  return ok ? (value as unknown as Omit<TaskPayload, "task">) : null;
}

/** A task group as it arrives, its tasks not looked at (task-check.ts checks each). */
export function fastTaskGroupEnvelope(
  value: unknown,
): { tasks: Record<string, unknown>; payloads: (Omit<TaskPayload, "task"> & { task_key: string })[] } | null {
  const ok =
    isRecord(value) &&
    onlyKeys(value, GROUP_KEYS) &&
    isRecord(value.tasks) &&
    Array.isArray(value.payloads) &&
    everyItem(value.payloads, (payload) => fastPayloadEnvelope(payload) !== null);
  return ok ? (value as unknown as ReturnType<typeof fastTaskGroupEnvelope>) : null;
}

/** A task result as it arrives, when it is a success or plain failure whose steps carry no error or undo. */
export function fastTaskResult(value: unknown): TaskResult | null {
  if (!isRecord(value) || !onlyKeys(value, RESULT_KEYS)) {
    return null;
  }
  const ok =
    isName(value.token_id) &&
    typeof value.success === "boolean" &&
    (value.output === undefined || firstNonJson(value.output) === null) &&
    value.error === undefined &&
    value.suspended === undefined &&
    isMetrics(value.metrics) &&
    (value.steps === undefined || (Array.isArray(value.steps) && everyItem(value.steps, isPlainStep)));
  return ok ? (value as unknown as TaskResult) : null;
}

const GROUP_PAYLOAD_KEYS = new Set([
  "token_id",
  "workflow_run_id",
  "workflow_id",
  "workflow_version",
  "parent_run_id",
  "node_id",
  "item_index",
  "iteration",
  "task_id",
  "task_version",
  "task_key",
  "input",
  "resources",
  "timeout_ms",
  "retry_attempt",
  "tools",
  "resume",
]);
const GROUP_KEYS = new Set(["tasks", "payloads"]);
const RESULT_KEYS = new Set(["token_id", "success", "output", "error", "suspended", "metrics", "steps"]);
const METRICS_KEYS = new Set<keyof TaskMetrics>(["duration_ms", "steps_executed", "llm_tokens"]);
const TOKENS_KEYS = new Set<keyof TaskMetrics["llm_tokens"]>(["input", "output", "cost_usd"]);
const STEP_KEYS = new Set<keyof StepRecord>(["step", "action", "status", "duration_ms", "attempts"]);
const ATTEMPT_KEYS = new Set<keyof CallAttempt>(["attempt", "duration_ms", "retry_in_ms", "retry_reason", "call"]);
const STEP_STATUSES = new Set(["completed", "skipped", "failed", "continued", "suspended"]);
const RETRY_REASON_SET = new Set<string>(RETRY_REASONS);

function isMetrics(value: unknown): boolean {
  if (!isRecord(value) || !onlyKeys(value, METRICS_KEYS) || !isDuration(value.duration_ms)) {
    return false;
  }
  const tokens = value.llm_tokens;
  return (
    isCount(value.steps_executed, 0) &&
    isRecord(tokens) &&
    onlyKeys(tokens, TOKENS_KEYS) &&
    isCount(tokens.input, 0) &&
    isCount(tokens.output, 0) &&
    isDuration(tokens.cost_usd)
  );
}

/** A step record without `error`, `else` or `undo` (those go to the schema). */
function isPlainStep(value: unknown): boolean {
  return (
    isRecord(value) &&
    onlyKeys(value, STEP_KEYS) &&
    typeof value.step === "string" &&
    typeof value.action === "string" &&
    typeof value.status === "string" &&
    STEP_STATUSES.has(value.status) &&
    isDuration(value.duration_ms) &&
    Array.isArray(value.attempts) &&
    everyItem(value.attempts, isPlainAttempt)
  );
}

/** A call attempt without `error`. */
function isPlainAttempt(value: unknown): boolean {
  return (
    isRecord(value) &&
    onlyKeys(value, ATTEMPT_KEYS) &&
    isCount(value.attempt, 1) &&
    isDuration(value.duration_ms) &&
    (value.retry_in_ms === undefined || isDuration(value.retry_in_ms)) &&
    (value.retry_reason === undefined ||
      (typeof value.retry_reason === "string" && RETRY_REASON_SET.has(value.retry_reason))) &&
    (value.call === undefined || (isRecord(value.call) && firstNonJson(value.call) === null))
  );
}

/** Whether every item passes, holes included (`every` skips a sparse array's holes; a schema reads them as undefined). */
function everyItem(items: unknown[], check: (item: unknown) => boolean): boolean {
  for (let index = 0; index < items.length; index += 1) {
    if (!check(items[index])) {
      return false;
    }
  }
  return true;
}

/** A plain object (not an array), as the schemas' objects and records require. */
function isRecord(value: unknown): value is Fields {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return false;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** No member outside `allowed`: a strict object. */
function onlyKeys(value: Fields, allowed: ReadonlySet<string>): boolean {
  for (const key of Object.keys(value)) {
    if (!allowed.has(key)) {
      return false;
    }
  }
  return true;
}

/** `z.string().min(1)`. */
function isName(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

/** `z.number().int().min(min)`: zod's `int` is a safe integer. */
function isCount(value: unknown, min: number): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= min;
}

/** `z.number().min(0)`: finite, not negative. */
function isDuration(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}
