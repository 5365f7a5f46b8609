import { z } from "zod";
import { setBounded } from "../lib/bounded-cache.ts";
import { isPlainObject } from "../lib/expr/template-values.ts";
import { issuesToDetails } from "../lib/validation.ts";
import type { ErrorDetail } from "../schemas/errors.ts";
import { TaskGroup } from "../schemas/payload.ts";
import { ResolvedTask } from "../schemas/resolved.ts";
import { fastTaskGroupEnvelope } from "../schemas/payload-fast.ts";

/** Checked tasks remembered per isolate, at most. */
const MAX_CHECKED_TASKS = 128;
/** Tasks longer than this (JSON characters) are checked every time, never remembered. */
const MAX_REMEMBERED_TASK_CHARS = 50_000;

/** A task group as it arrives: the payloads checked as a whole, each task by {@link checkTask}. */
const TaskGroupEnvelope = TaskGroup.extend({ tasks: z.record(z.string(), z.unknown()) });

/**
 * Task definitions this isolate has checked, by the exact JSON text of the
 * task with its names left out (the `id` and `version` of the task, of each
 * step's action and of each undo's action), with the JSON text of what the
 * check returned. A run sends a task with every dispatch (each node of a
 * chain, each item of a foreach, each retry), and checking a definition is
 * most of what reading a payload costs; its JSON text is a fraction of that.
 * Names are left out because a workflow's inline tasks and actions are named
 * after their nodes: a chain of 200 nodes running the same steps is 200 names
 * and one definition. A name never changes a verdict once it is well-formed,
 * and each is checked on every dispatch; the rest is checked in full the first
 * time each isolate sees it, and nothing is trusted that was not.
 */
const checked = new Map<string, string>();

/** A task group checked against its schema, or the details of what is wrong with it. */
export function checkTaskGroup(group: unknown): { group: TaskGroup } | { details: ErrorDetail[] } {
  const fast = fastTaskGroupEnvelope(group);
  const envelope = fast === null ? TaskGroupEnvelope.safeParse(group) : { success: true as const, data: fast };
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

function checkTask(task: unknown): { task: ResolvedTask } | { issues: z.core.$ZodIssue[] } {
  const holders = isPlainObject(task) ? nameHolders(task) : [];
  const key = holders.length > 0 ? namelessText(task, holders) : null;
  const remembered = key === null ? undefined : checked.get(key);
  if (remembered !== undefined && holders.every(hasWellFormedName)) {
    // A fresh copy of what the check returned, under this task's names: nothing one dispatch
    // does to its task (the JSON Schema validator memoizes on schema objects) reaches another run's.
    const copy = JSON.parse(remembered) as ResolvedTask;
    nameHolders(copy as unknown as Record<string, unknown>).forEach((holder, index) => {
      holder.id = holders[index]?.id;
      holder.version = holders[index]?.version;
    });
    return { task: copy };
  }
  const parsed = ResolvedTask.safeParse(task);
  if (!parsed.success) {
    return { issues: parsed.error.issues };
  }
  if (key !== null && key.length <= MAX_REMEMBERED_TASK_CHARS) {
    setBounded(checked, key, JSON.stringify(parsed.data), MAX_CHECKED_TASKS);
  }
  return { task: parsed.data };
}

/** The objects of a task that carry a name (`id` and `version`): the task, each step's action, each undo's action. */
function nameHolders(task: Record<string, unknown>): Record<string, unknown>[] {
  const holders = [task];
  for (const step of Array.isArray(task.steps) ? (task.steps as unknown[]) : []) {
    const action = isPlainObject(step) ? step.action : undefined;
    if (isPlainObject(action)) {
      holders.push(action);
      const undo = action.undo;
      if (isPlainObject(undo) && isPlainObject(undo.action)) {
        holders.push(undo.action);
      }
    }
  }
  return holders;
}

/** As the schema checks a name: a non-empty `id` and a `version` that is a safe integer ≥ 0 (zod's `int`). */
function hasWellFormedName(holder: Record<string, unknown>): boolean {
  const { id, version } = holder;
  return (
    typeof id === "string" &&
    id.length > 0 &&
    typeof version === "number" &&
    Number.isSafeInteger(version) &&
    version >= 0
  );
}

/** The task's JSON text with its holders' names blanked, or null for one JSON cannot write. */
function namelessText(task: unknown, holders: readonly Record<string, unknown>[]): string | null {
  const named = new Set<unknown>(holders);
  try {
    return (
      JSON.stringify(task, function (this: unknown, key: string, value: unknown) {
        return (key === "id" || key === "version") && named.has(this) ? 0 : value;
      }) ?? null
    );
  } catch {
    return null; // a cycle, a BigInt: the schema says what is wrong
  }
}
