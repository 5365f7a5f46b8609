import type { ErrorDetail } from "../lib/errors.ts";
import {
  MAX_TRIGGERED_WORKFLOWS_PER_EVENT,
  type DefinitionBundle,
  type IndexedTrigger,
  type TriggerList,
  type Workflow,
} from "../schemas/definitions.ts";

/**
 * The catalog's trigger index (docs/architecture.md, "Event triggers"): one
 * row per trigger of each workflow's latest version, keyed by event name, so
 * "which workflows start on events named X" is one indexed read. A
 * registration that stores a new version of a workflow replaces its rows in
 * the same transaction; an identical one (the existing version) keeps them.
 */

interface TriggerRow extends Record<string, SqlStorageValue> {
  workflow: string;
  version: number;
  body: string;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS triggers (
  name TEXT NOT NULL, workflow TEXT NOT NULL, position INTEGER NOT NULL, version INTEGER NOT NULL,
  body TEXT NOT NULL, PRIMARY KEY (name, workflow, position))`;

export class TriggerIndex {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(SCHEMA);
    sql.exec("CREATE INDEX IF NOT EXISTS triggers_by_workflow ON triggers (workflow)");
  }

  /** Makes `version` of a workflow (its new latest) the one whose triggers the index holds. */
  replace(workflow: Workflow, version: number): void {
    this.sql.exec("DELETE FROM triggers WHERE workflow = ?", workflow.id);
    (workflow.triggers ?? []).forEach((trigger, position) => {
      this.sql.exec(
        "INSERT INTO triggers (name, workflow, position, version, body) VALUES (?, ?, ?, ?, ?)",
        trigger.event,
        workflow.id,
        position,
        version,
        JSON.stringify(trigger),
      );
    });
  }

  /** The triggers on `name`, by workflow id, each workflow's in declared order. */
  triggersFor(name: string): TriggerList {
    const rows = this.sql
      .exec<TriggerRow>("SELECT workflow, version, body FROM triggers WHERE name = ? ORDER BY workflow, position", name)
      .toArray();
    // Written by replace from a parsed workflow's trigger.
    const triggers = rows.map((row) => ({
      ...(JSON.parse(row.body) as IndexedTrigger),
      workflow: row.workflow,
      version: row.version,
    }));
    return { triggers };
  }

  /** The workflows whose latest version has a trigger on `name`. */
  workflowsOn(name: string): Set<string> {
    const rows = this.sql.exec<{ workflow: string }>("SELECT DISTINCT workflow FROM triggers WHERE name = ?", name);
    return new Set([...rows].map((row) => row.workflow));
  }
}

/**
 * The limit the index keeps: at most {@link MAX_TRIGGERED_WORKFLOWS_PER_EVENT}
 * workflows with a trigger on one event name, counting the stored ones this
 * bundle does not replace and the bundle's own. Each refused trigger is named
 * by its path (`workflows.3.triggers.0.event`).
 */
export function checkTriggerLimits(bundle: DefinitionBundle, index: Pick<TriggerIndex, "workflowsOn">): ErrorDetail[] {
  const inBundle = new Set((bundle.workflows ?? []).map((workflow) => workflow.id));
  const counted = new Map<string, Set<string>>();
  const problems: ErrorDetail[] = [];
  (bundle.workflows ?? []).forEach((workflow, i) => {
    workflow.triggers?.forEach((trigger, j) => {
      let on = counted.get(trigger.event);
      if (on === undefined) {
        on = new Set([...index.workflowsOn(trigger.event)].filter((id) => !inBundle.has(id)));
        counted.set(trigger.event, on);
      }
      on.add(workflow.id);
      if (on.size > MAX_TRIGGERED_WORKFLOWS_PER_EVENT) {
        problems.push({
          path: `workflows.${i}.triggers.${j}.event`,
          message: `${on.size} workflows would have a trigger on "${trigger.event}"; at most ${MAX_TRIGGERED_WORKFLOWS_PER_EVENT} may (one event starts at most that many runs)`,
          code: "definition.too_many_triggers",
        });
      }
    });
  });
  return problems;
}
