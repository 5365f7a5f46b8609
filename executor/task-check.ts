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
 * Task definitions this isolate has checked, by their exact JSON text, with the
 * JSON text of what the check returned. A run
 * sends the same task with every dispatch (each node of a chain, each item of
 * a foreach, each retry), and checking a definition is most of what reading
 * a group costs; its JSON text is a fraction of that. Same text, same
 * definition, same verdict: a task is still checked in full the first time
 * each isolate sees it, and nothing is trusted that was not.
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
  const text = jsonText(task);
  const remembered = text === null ? undefined : checked.get(text);
  if (remembered !== undefined) {
    // A fresh copy of what the check returned: nothing one dispatch does to its task
    // (the JSON Schema validator memoizes on schema objects) reaches another run's.
    return { task: JSON.parse(remembered) as ResolvedTask };
  }
  const parsed = ResolvedTask.safeParse(task);
  if (!parsed.success) {
    return { issues: parsed.error.issues };
  }
  if (text !== null && text.length <= MAX_REMEMBERED_TASK_CHARS) {
    setBounded(checked, text, JSON.stringify(parsed.data), MAX_CHECKED_TASKS);
  }
  return { task: parsed.data };
}

/** The value's JSON text, or null for one JSON cannot write (a cycle, a BigInt): the schema then says what is wrong. */
function jsonText(value: unknown): string | null {
  try {
    return JSON.stringify(value) ?? null;
  } catch {
    return null;
  }
}
