import { z } from "zod";
import { setBounded } from "../lib/bounded-cache.ts";
import { issuesToDetails } from "../lib/validation.ts";
import { ResolvedTask, TaskGroup, TaskPayload, type ErrorDetail } from "../schemas/index.ts";

/** Checked tasks remembered per isolate, at most. */
const MAX_CHECKED_TASKS = 128;
/** Tasks longer than this (JSON characters) are checked every time, never remembered. */
const MAX_REMEMBERED_TASK_CHARS = 50_000;

/** A task group as it arrives: the payloads checked as a whole, each task by {@link checkTask}. */
const TaskGroupEnvelope = TaskGroup.extend({ tasks: z.record(z.string(), z.unknown()) });
/** One task payload as it arrives: checked as a whole, its task by {@link checkTask}. */
const TaskPayloadEnvelope = TaskPayload.extend({ task: z.unknown() });

/**
 * Task definitions this isolate has checked, by the exact JSON text of their
 * body (everything but `id` and `version`), with the JSON text of what the
 * check returned. A run sends a task with every dispatch (each node of a
 * chain, each item of a foreach, each retry), and checking a definition is
 * most of what reading a payload costs; its JSON text is a fraction of that.
 * The name is left out of the key because a workflow's inline tasks are named
 * after their nodes: a chain of 200 nodes running the same steps is 200 names
 * and one body. Same body, same verdict: a body is still checked in full the
 * first time each isolate sees it, and nothing is trusted that was not.
 */
const checked = new Map<string, string>();

/** A task group checked against its schema, or the details of what is wrong with it. */
export function checkTaskGroup(group: unknown): { group: TaskGroup } | { details: ErrorDetail[] } {
  const envelope = TaskGroupEnvelope.safeParse(group);
  if (!envelope.success) {
    return { details: issuesToDetails(envelope.error.issues) };
  }
  const tasks: Record<string, ResolvedTask> = {};
  const details: ErrorDetail[] = [];
  for (const [key, task] of Object.entries(envelope.data.tasks)) {
    const result = checkTask(task);
    if ("task" in result) {
      tasks[key] = result.task;
    } else {
      details.push(...issuesToDetails(result.issues, `tasks.${key}`));
    }
  }
  return details.length > 0 ? { details } : { group: { tasks, payloads: envelope.data.payloads } };
}

/** One task payload checked against its schema, or the details of what is wrong with it. */
export function checkTaskPayload(payload: unknown): { payload: TaskPayload } | { details: ErrorDetail[] } {
  const envelope = TaskPayloadEnvelope.safeParse(payload);
  if (!envelope.success) {
    return { details: issuesToDetails(envelope.error.issues) };
  }
  const result = checkTask(envelope.data.task);
  return "task" in result
    ? { payload: { ...envelope.data, task: result.task } }
    : { details: issuesToDetails(result.issues, "task") };
}

function checkTask(task: unknown): { task: ResolvedTask } | { issues: z.core.$ZodIssue[] } {
  const named = nameAndBody(task);
  const text = named === null ? null : jsonText(named.body);
  const remembered = text === null ? undefined : checked.get(text);
  if (named !== null && remembered !== undefined) {
    // A fresh copy of what the check returned: nothing one dispatch does to its task
    // (the JSON Schema validator memoizes on schema objects) reaches another run's.
    return { task: { id: named.id, version: named.version, ...(JSON.parse(remembered) as TaskBody) } };
  }
  const parsed = ResolvedTask.safeParse(task);
  if (!parsed.success) {
    return { issues: parsed.error.issues };
  }
  if (text !== null && text.length <= MAX_REMEMBERED_TASK_CHARS) {
    const { id: _id, version: _version, ...body } = parsed.data;
    setBounded(checked, text, JSON.stringify(body), MAX_CHECKED_TASKS);
  }
  return { task: parsed.data };
}

type TaskBody = Omit<ResolvedTask, "id" | "version">;

/**
 * A task's name, checked as {@link ResolvedTask} checks it, and the rest of
 * it; null when the name is not well-formed (the schema then says why).
 */
function nameAndBody(task: unknown): { id: string; version: number; body: Record<string, unknown> } | null {
  if (typeof task !== "object" || task === null || Array.isArray(task)) {
    return null;
  }
  const { id, version, ...body } = task as Record<string, unknown>;
  const named = typeof id === "string" && id.length > 0 && Number.isInteger(version) && (version as number) >= 0;
  return named ? { id, version: version as number, body } : null;
}

/** The value's JSON text, or null for one JSON cannot write (a cycle, a BigInt): the schema then says what is wrong. */
function jsonText(value: unknown): string | null {
  try {
    return JSON.stringify(value) ?? null;
  } catch {
    return null;
  }
}
