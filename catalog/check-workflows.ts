import { MCP_TOOL_PREFIX, type InlineTask, type Node, type Step, type Workflow } from "../schemas/definitions.ts";
import { checkAction } from "./check-actions.ts";
import { checkLimitUses } from "./check-limits.ts";
import {
  CEL_SCOPES,
  checkCel,
  checkJsonPath,
  checkMappings,
  checkReference,
  checkSchema,
  type CheckContext,
} from "./checks.ts";

/** A workflow's schemas, its nodes (inline tasks, references, expressions, bindings) and its DAG. */
export function checkWorkflow(workflow: Workflow, path: string, check: CheckContext): void {
  checkSchema(workflow.input_schema, `${path}.input_schema`, check.problems);
  checkSchema(workflow.output_schema, `${path}.output_schema`, check.problems);
  for (const [nodeId, node] of Object.entries(workflow.nodes)) {
    checkNode(workflow, nodeId, node, `${path}.nodes.${nodeId}`, check);
  }
  checkLimitUses(workflow.limits, `${path}.limits`, "workflow", check);
  workflow.triggers?.forEach((trigger, i) => {
    checkCel(trigger.if, `${path}.triggers.${i}.if`, check.report, CEL_SCOPES.trigger);
    checkMappings(trigger.input, `${path}.triggers.${i}.input`, check.report, CEL_SCOPES.trigger);
  });
  if (workflow.mcp?.expose === true && workflow.id.startsWith(MCP_TOOL_PREFIX)) {
    // Its tool would shadow, or be shadowed by, one of the MCP server's own tools (src/mcp/tools.ts).
    check.report(
      `${path}.mcp.expose`,
      `an exposed workflow's id names its MCP tool, and ids starting with "${MCP_TOOL_PREFIX}" are the server's own`,
      "workflow.mcp_reserved_name",
    );
  }
  const cycle = findCycle(workflow);
  if (cycle) {
    check.report(
      `${path}.nodes.${cycle[0]}.depends_on`,
      `depends_on forms a cycle: ${cycle.join(" → ")}`,
      "workflow.cycle",
    );
  }
}

function checkNode(workflow: Workflow, nodeId: string, node: Node, nodePath: string, check: CheckContext): void {
  const { lookup, report } = check;
  if (typeof node.task === "string") {
    checkReference("tasks", node.task, `${nodePath}.task`, lookup, report);
  } else if (node.task) {
    checkTask(node.task, `${nodePath}.task`, check);
  }
  if (typeof node.workflow === "string") {
    checkReference("workflows", node.workflow, `${nodePath}.workflow`, lookup, report);
  } else if (node.workflow !== undefined) {
    checkJsonPath(node.workflow.from, `${nodePath}.workflow.from`, report);
    node.workflow.allowed.forEach((ref, i) =>
      checkReference("workflows", ref, `${nodePath}.workflow.allowed.${i}`, lookup, report),
    );
  }
  node.depends_on?.forEach((dependency, i) => {
    if (dependency === nodeId) {
      report(`${nodePath}.depends_on.${i}`, `node "${nodeId}" depends on itself`, "workflow.cycle");
    } else if (!Object.hasOwn(workflow.nodes, dependency)) {
      report(`${nodePath}.depends_on.${i}`, `no node "${dependency}" in this workflow`, "workflow.unknown_node");
    }
  });
  const itemScope = node.foreach ? CEL_SCOPES.foreachItem : CEL_SCOPES.run;
  checkCel(node.when, `${nodePath}.when`, report, itemScope);
  checkCel(node.repeat?.until, `${nodePath}.repeat.until`, report, CEL_SCOPES.run);
  if (node.foreach) {
    checkJsonPath(node.foreach.items, `${nodePath}.foreach.items`, report);
  }
  checkMappings(node.input_mapping, `${nodePath}.input_mapping`, report, itemScope);
  checkMappings(node.output_mapping, `${nodePath}.output_mapping`, report, CEL_SCOPES.nodeOutput);
  for (const [name, resource] of Object.entries(node.resource_bindings ?? {})) {
    if (!workflow.resources?.[resource]) {
      report(
        `${nodePath}.resource_bindings.${name}`,
        `no resource "${resource}" is declared in "resources"`,
        "workflow.unknown_resource",
      );
    }
  }
}

/** A cycle through `depends_on` as the list of node ids along it (first repeated last), if any. */
export function findCycle(workflow: Pick<Workflow, "nodes">): string[] | undefined {
  const state = new Map<string, "visiting" | "done">();
  const stack: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === "done") {
      return undefined;
    }
    if (state.get(id) === "visiting") {
      return [...stack.slice(stack.indexOf(id)), id];
    }
    state.set(id, "visiting");
    stack.push(id);
    for (const dependency of workflow.nodes[id]?.depends_on ?? []) {
      if (dependency !== id && workflow.nodes[dependency]) {
        const cycle = visit(dependency);
        if (cycle) {
          return cycle;
        }
      }
    }
    stack.pop();
    state.set(id, "done");
    return undefined;
  };
  for (const id of Object.keys(workflow.nodes)) {
    const cycle = visit(id);
    if (cycle) {
      return cycle;
    }
  }
  return undefined;
}

/** A task's schemas and steps: unique refs, each step's action (inline or referenced), condition and mappings. */
export function checkTask(task: InlineTask, path: string, check: CheckContext): void {
  const { lookup, report } = check;
  checkSchema(task.input_schema, `${path}.input_schema`, check.problems);
  checkSchema(task.output_schema, `${path}.output_schema`, check.problems);
  const refs = new Set<string>();
  task.steps.forEach((step: Step, i) => {
    const stepPath = `${path}.steps.${i}`;
    if (refs.has(step.ref)) {
      report(`${stepPath}.ref`, `step ref "${step.ref}" appears twice in this task`, "task.duplicate_step");
    }
    refs.add(step.ref);
    if (typeof step.action === "string") {
      checkReference("actions", step.action, `${stepPath}.action`, lookup, report);
    } else {
      checkAction(step.action, `${stepPath}.action`, check);
    }
    checkCel(step.condition?.if, `${stepPath}.condition.if`, report, CEL_SCOPES.task);
    checkMappings(step.input_mapping, `${stepPath}.input_mapping`, report, CEL_SCOPES.task);
    checkMappings(step.output_mapping, `${stepPath}.output_mapping`, report, CEL_SCOPES.calleeOutput);
  });
}
