import type { CallToolResult, CreateTaskResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { EngineError } from "../../lib/errors.ts";
import type { JsonObject } from "../../schemas/common.ts";
import type { ExposedWorkflow } from "../../schemas/mcp.ts";
import { accessOf, authorize, inGrant } from "../access.ts";
import { exposedWorkflows, getRun, startRun } from "../service.ts";
import { followRun, waitBounds } from "./follow.ts";
import { reportLinks } from "./links.ts";
import { runResult, toolError } from "./results.ts";
import { taskRequestError, toTask } from "./tasks.ts";
import { toRunInput, toToolInputSchema, toToolOutputSchema } from "./schema-map.ts";
import { toolCallKey, toolCallWaitMs } from "./session.ts";
import { mayCall, type ToolContext } from "./tools.ts";

/**
 * Workflows as tools (docs/mcp.md, "Workflows as tools"): each workflow whose
 * latest version says `mcp: { expose: true }` is a tool named after its id.
 * Calling it starts a run, as `POST /v1/workflows/{id}/runs` would, and waits
 * for it (src/mcp/follow.ts `waitBounds`).
 */

/** The exposed workflows the principal may start, as tools. */
export async function listWorkflowTools(context: Pick<ToolContext, "env" | "principal">): Promise<Tool[]> {
  if (!mayCall(context.principal, "startRun")) {
    return [];
  }
  return (await exposedWorkflows(context.env, context.principal.workflows)).map(toWorkflowTool);
}

export function toWorkflowTool(workflow: ExposedWorkflow): Tool {
  const output = toToolOutputSchema(workflow.output_schema);
  return {
    name: workflow.id,
    title: workflow.id,
    description: workflow.mcp.description ?? workflow.description ?? `Runs the Trellis workflow ${workflow.id}.`,
    inputSchema: toToolInputSchema(workflow.input_schema).schema as Tool["inputSchema"],
    ...(output === undefined ? {} : { outputSchema: output.schema as Tool["outputSchema"] }),
    execution: { taskSupport: "optional" },
  };
}

/**
 * Calls the workflow tool `name`: null when the principal sees no exposed
 * workflow of that name (an unknown tool). An error of the start (a bad
 * input's 400 with its problems, a missing role) is the tool's error result.
 */
export async function callWorkflowTool(
  context: ToolContext,
  name: string,
  args: JsonObject,
): Promise<CallToolResult | null> {
  const workflow = await exposedTool(context, name);
  if (workflow === undefined) {
    return null;
  }
  const outputSchema = toToolOutputSchema(workflow.output_schema);
  try {
    authorize(context.principal, accessOf("startRun"));
    const runId = await startToolRun(context, workflow, args);
    const started = Date.now();
    const { view, asked } = await followRun(
      { ...context, elicitation: context.session.elicitation },
      runId,
      waitBounds(toolCallWaitMs(context.meta)),
    );
    const waitedSeconds = Math.round((Date.now() - started) / 1000);
    const links = await reportLinks(context.env, view, context.principal, context.origin);
    return runResult(view, { origin: context.origin, outputSchema, waitedSeconds, asked, links });
  } catch (thrown) {
    return toolError(thrown, name, outputSchema !== undefined);
  }
}

/** The exposed workflow the principal sees as the tool `name`. */
async function exposedTool(context: ToolContext, name: string): Promise<ExposedWorkflow | undefined> {
  if (!inGrant(context.principal, name)) {
    return undefined;
  }
  const [workflow] = await exposedWorkflows(context.env, context.principal.workflows, name);
  return workflow;
}

/**
 * Calls the workflow tool `name` as a task (docs/mcp.md, "Tasks"): starts
 * its run (one per call, as a plain call) and answers at once with the run
 * as a task. Null for an unknown tool; an error of the start is the
 * request's JSON-RPC error, with the API's problems: no run, no task.
 */
export async function startWorkflowTask(
  context: ToolContext,
  name: string,
  args: JsonObject,
): Promise<CreateTaskResult | null> {
  const workflow = await exposedTool(context, name);
  if (workflow === undefined) {
    return null;
  }
  try {
    authorize(context.principal, accessOf("startRun"));
    const runId = await startToolRun(context, workflow, args);
    return { task: toTask(await getRun(context.env, runId)) };
  } catch (thrown) {
    throw taskRequestError(thrown);
  }
}

/** Starts the call's run (the version just listed as exposed), or finds the one its idempotency key started. */
async function startToolRun(context: ToolContext, workflow: ExposedWorkflow, args: JsonObject): Promise<string> {
  const key = await toolCallKey(context.meta, context.session.id, context.requestId);
  const body = {
    input: toRunInput(args, toToolInputSchema(workflow.input_schema)),
    version: workflow.version,
    ...(key === undefined ? {} : { idempotency_key: key }),
  };
  const started = await startRun(context.env, workflow.id, body, context.principal);
  if (started.run.run_id === null) {
    throw new EngineError("internal.error", `starting ${workflow.id} answered no run`);
  }
  return started.run.run_id;
}
