import type { PlannedNode, RunPlan } from "../coordinator/plan.ts";
import type { RunView } from "../schemas/index.ts";
import type { Entry } from "./events.ts";
import { runLimitLines } from "./limits.ts";
import { nodeLines } from "./nodes.ts";

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const SETTLED = new Set(["completed", "failed", "skipped", "cancelled"]);

/** `3/5 nodes`, and each foreach node that is under way as `name 40/100`. */
export function progressOf(view: RunView): string {
  const nodes = Object.entries(view.nodes);
  const settled = nodes.filter(([, node]) => SETTLED.has(node.status)).length;
  const items = nodes
    .filter(([, node]) => node.items && node.status !== "pending")
    .map(([id, node]) => {
      const done = (node.items?.completed ?? 0) + (node.items?.failed ?? 0) + (node.items?.skipped ?? 0);
      return `${id} ${done}/${node.items?.total ?? 0}`;
    });
  return [`${settled}/${nodes.length} nodes`, ...items].join("  ");
}

/** One line per journal entry: time, seq, kind, where, and what happened. */
export function entryLine(entry: Entry): string {
  const time = entry.at.slice(11, 23);
  const body = entry.body;
  const node = typeof body.node === "string" ? body.node : "";
  const item = typeof body.item === "number" ? `[${body.item}]` : "";
  const where = `${node}${item}${typeof body.step === "string" ? ` ${body.step}` : ""}`;
  return [time, `#${entry.seq}`.padStart(5), entry.kind.padEnd(20), where.padEnd(16), summaryOf(entry)]
    .join("  ")
    .trimEnd();
}

function summaryOf(entry: Entry): string {
  const body = entry.body;
  const error = body.error as { code?: string; message?: string } | undefined;
  switch (entry.kind) {
    case "run.created":
      return `${JSON.stringify(body.workflow)} (${String(body.mode)})`;
    case "run.status":
      return `${String(body.from)} → ${String(body.to)}${typeof body.reason === "string" ? `: ${body.reason}` : ""}`;
    case "task.completed":
      return `${String(body.duration_ms)} ms, ${Array.isArray(body.steps) ? body.steps.length : 0} steps`;
    case "task.failed":
    case "node.failed":
      return error ? `${error.code}: ${error.message}` : "";
    case "task.retry_scheduled":
      return `attempt ${String(body.attempt)} at ${String(body.at)}`;
    case "gate.opened":
    case "gate.answered":
    case "gate.expired":
      return String(body.gate_id ?? "");
    case "child.started":
    case "child.finished":
      return `${String(body.child_run_id)}${typeof body.status === "string" ? ` ${body.status}` : ""}`;
    case "attest":
      return String(body.outcome);
    case "limit.waiting":
    case "limit.granted":
    case "limit.withdrawn":
    case "run.limit_waiting":
    case "run.limit_granted":
      return limitSummary(body);
    default:
      return "";
  }
}

/** A `limit.*` or `run.limit_*` entry: `api-quota@2 key "acme"`, then its priority, wait or reason. */
function limitSummary(body: Entry["body"]): string {
  const limit = body.limit as { id?: string; version?: number } | undefined;
  return [
    `${String(limit?.id)}@${String(limit?.version)} key ${JSON.stringify(body.limit_key)}`,
    typeof body.priority === "number" ? `priority ${body.priority}` : "",
    typeof body.waited_ms === "number" ? `after ${body.waited_ms} ms` : "",
    typeof body.reason === "string" ? body.reason : "",
  ]
    .filter((part) => part !== "")
    .join("  ");
}

/** A run view as a person reads it. */
export function runText(view: RunView): string {
  const lines = [
    `${view.run_id}  ${view.workflow.id}@${view.workflow.version}  ${view.status}  (${view.mode}, created ${view.created_at})`,
  ];
  if (view.parent) {
    lines.push(
      `parent: ${view.parent.run_id} (node ${view.parent.node}${view.parent.step ? `, step ${view.parent.step}` : ""})`,
    );
  }
  lines.push(...runLimitLines(view));
  // In the view's order: dependency order, as the API lists nodes.
  for (const [id, node] of Object.entries(view.nodes)) {
    lines.push(...nodeLines(id, node));
  }
  for (const gate of view.gates.filter((gate) => gate.status === "open")) {
    lines.push(`  gate ${gate.gate_id} (${gate.kind}) open at ${gate.node}/${gate.step}: ${gate.prompt}`);
  }
  for (const child of view.children) {
    lines.push(`  child ${child.run_id} (node ${child.node}) ${child.status ?? "running"}`);
  }
  if (view.usage.input_tokens + view.usage.output_tokens > 0) {
    lines.push(`  tokens ${view.usage.input_tokens} in, ${view.usage.output_tokens} out, $${view.usage.cost_usd}`);
  }
  if (view.error) {
    lines.push(`error: ${view.error.code}: ${view.error.message}`);
  }
  lines.push(...compensationLines(view), ...resultLines(view));
  if (view.status === "completed" && !view.results) {
    lines.push(`output: ${JSON.stringify(view.output)}`);
  }
  return lines.join("\n");
}

/** The run's undos, in the order a compensation runs them (the latest completion first), and how it went. */
function compensationLines(view: RunView): string[] {
  const compensation = view.compensation;
  if (compensation === undefined) {
    return [];
  }
  const trigger = compensation.trigger === null ? "" : ` (${compensation.trigger})`;
  return [
    `compensation: ${compensation.status}${trigger}`,
    ...[...compensation.undos].reverse().map((undo) => {
      const where = `${undo.node}${undo.item === null ? "" : `[${undo.item}]`} ${undo.step}`;
      const error = undo.error ? `  ${undo.error.code}: ${undo.error.message}` : "";
      return `  ${undo.status.padEnd(10)} undo of ${where}: ${undo.action}${error}`;
    }),
  ];
}

/** A plan run's ToolResults, one line each, in plan order (docs/plans.md). */
function resultLines(view: RunView): string[] {
  const results = view.results ?? [];
  return results.length === 0
    ? []
    : [
        "results:",
        ...results.map((result) => {
          const outcome = outcomeOf(result);
          if (outcome !== "ok" && outcome !== "failed") {
            return `  ${outcome.padEnd(9)} ${result.step}  ${result.tool}`;
          }
          const error = result.error ? `  ${result.error.code}: ${result.error.message}` : "";
          return `  ${outcome.padEnd(9)} ${result.step}  ${result.tool}  ${result.metadata.executionTime} ms${error}`;
        }),
      ];
}

/** A run preview (`mode: "preview"`) as a person reads it: layers, what each node would run, the high-risk steps. */
export function previewText(workflow: { id: string; version: number }, plan: RunPlan): string {
  const nodes = Object.keys(plan.nodes).length;
  const lines = [
    `preview: ${workflow.id}@${workflow.version}, ${nodes} node(s) in ${plan.layers.length} layer(s); nothing ran`,
  ];
  plan.layers.forEach((layer, index) => lines.push(`  layer ${index + 1}: ${layer.join(", ")}`));
  for (const id of plan.layers.flat()) {
    const node = plan.nodes[id];
    if (node === undefined) {
      continue;
    }
    const after = node.depends_on.length > 0 ? `  after ${node.depends_on.join(", ")}` : "";
    const when = node.when === null ? "" : `  when ${node.when}`;
    const over = node.foreach === null ? "" : `  once per item of ${node.foreach}`;
    lines.push(`  ${id}  ${runsWhat(node)}${after}${when}${over}`);
    for (const action of node.actions) {
      lines.push(`      ${action.step}  ${action.kind}  ${action.id}@${action.version}  risk ${action.risk}`);
    }
  }
  const risky = plan.high_risk.map((step) => `${step.node}/${step.step} (${step.action})`);
  lines.push(`high-risk, each waits for an approval: ${risky.length > 0 ? risky.join(", ") : "none"}`);
  return lines.join("\n");
}

/** What a planned node runs: its pinned task or child workflow, or the workflows it may choose from. */
function runsWhat(node: PlannedNode): string {
  if (node.task !== null) {
    return `task ${node.task.id}@${node.task.version}`;
  }
  if (node.workflow !== null) {
    return `workflow ${node.workflow.id}@${node.workflow.version}`;
  }
  const choice = node.workflow_choice;
  return choice === null ? "nothing" : `workflow chosen by ${choice.from} from ${choice.allowed.join(", ")}`;
}

/**
 * How a plan step ended, as its ToolResult says: `ok`, `failed`, or `skipped` /
 * `cancelled` for a step that never ran (a fallback with nothing to answer is
 * skipped), `pending` for one that has not ended yet.
 */
function outcomeOf(result: NonNullable<RunView["results"]>[number]): string {
  if (result.success) {
    return "ok";
  }
  const code = result.error?.code;
  return code === undefined ? "pending" : (NOT_RUN[code] ?? "failed");
}

const NOT_RUN: Readonly<Record<string, string>> = {
  "plan.step_skipped": "skipped",
  "plan.step_cancelled": "cancelled",
};
