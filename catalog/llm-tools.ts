import { z } from "zod";
import { compileEcmaPattern } from "../lib/expr/regex-syntax.ts";
import {
  ACTION_TRAITS,
  MCP_TOOL_REF_PATTERN,
  STD_TOOL_REF_PATTERN,
  TOOL_NAME_PATTERN,
  type InlineAction,
  type InlineToolAction,
  type LlmTool,
} from "../schemas/actions.ts";
import { JsonSchema, parseReference } from "../schemas/common.ts";
import { TOOL_SCHEMAS, type ToolName } from "../schemas/tools.ts";

/**
 * What registration (check-tools.ts) and resolution (resolve.ts) both need to
 * know of an `llm` action's tools (docs/definitions.md, "Agents"): what each
 * entry names, the name the model sees, which actions cannot be tools.
 */

/** The fields that only an `llm` action with `tools` may set. */
export const AGENT_FIELDS = ["max_turns", "budget", "parallel_tool_calls"] as const;

/** Output keys the loop of an `llm` action with tools writes beside the answer, so its prompt's `produces` cannot declare them. */
export const RESERVED_AGENT_OUTPUT_KEYS = ["tool_calls", "turns", "usage"] as const;

/** What a tool entry names: a registered action, one tool of an MCP server, a standard library tool, or an inline action. */
export type ToolTarget =
  | { kind: "action"; ref: string }
  | { kind: "mcp"; server: string; tool: string }
  | { kind: "std"; tool: string }
  | { kind: "inline"; action: InlineToolAction };

/** A tool entry in one shape, whether written as a name or as `{ action, name?, description?, pin? }`. */
export interface ToolEntry {
  target: ToolTarget;
  name?: string;
  description?: string;
  pin?: string;
}

export function toolEntry(tool: LlmTool): ToolEntry {
  if (typeof tool === "string") {
    return { target: refTarget(tool) };
  }
  const { action, ...rest } = tool;
  return { ...rest, target: typeof action === "string" ? refTarget(action) : { kind: "inline", action } };
}

/** A `ToolRef` (the schema has checked it is one of the three forms). */
function refTarget(ref: string): ToolTarget {
  const mcp = MCP_TOOL_REF_PATTERN.exec(ref);
  if (mcp) {
    const [, server = "", version, tool = ""] = mcp;
    return { kind: "mcp", server: version === undefined ? server : `${server}@${version}`, tool };
  }
  const std = STD_TOOL_REF_PATTERN.exec(ref);
  return std ? { kind: "std", tool: std[1] ?? "" } : { kind: "action", ref };
}

/**
 * The name the model sees the tool by: the one written, else the action's id,
 * the MCP tool's or the standard tool's name. A problem when there is none, or
 * when the default is not a valid tool name (an MCP tool may be named anything).
 */
export function toolName(entry: ToolEntry): { name: string } | { problem: string } {
  if (entry.name !== undefined) {
    return { name: entry.name };
  }
  const { target } = entry;
  const fallback =
    target.kind === "action"
      ? parseReference(target.ref)?.id
      : target.kind === "inline"
        ? target.action.id
        : target.tool;
  if (fallback === undefined) {
    return { problem: 'an inline action without an id needs a "name" for the model' };
  }
  if (!TOOL_NAME_PATTERN.test(fallback)) {
    return {
      problem: `"${fallback}" is not a valid tool name (^[A-Za-z_][A-Za-z0-9_-]{0,63}$): give the tool a "name" for the model`,
    };
  }
  return { name: fallback };
}

/**
 * Why an action cannot be a tool, or undefined. A tool call is one call that
 * the loop waits for: a kind that suspends its task to wait (`human`, `sleep`,
 * `event`) cannot be one, except `workflow`, a child run (a nested agent is a
 * `workflow` tool), which must name its workflow; an `llm` action with tools of
 * its own cannot be one either (tools are one level deep).
 */
export function toolActionRefusal(action: InlineAction): string | undefined {
  if (action.kind === "workflow") {
    return typeof action.implementation.workflow === "string"
      ? undefined
      : "a workflow tool must name its workflow: one chosen at run time ({ from, allowed }) reads a task context that a tool call does not have";
  }
  if (ACTION_TRAITS[action.kind].suspends) {
    return `a ${action.kind} action cannot be a tool: it suspends its task to wait, and a tool is one call (a child workflow is the only waiting kind a tool may be)`;
  }
  if (action.kind === "llm" && action.implementation.tools !== undefined) {
    return "an llm action with tools of its own cannot be a tool: tools are one level deep (offer a nested agent as a workflow tool)";
  }
  return undefined;
}

/** The reserved output keys (`RESERVED_AGENT_OUTPUT_KEYS`) a prompt's `produces` declares, as properties or required. */
export function reservedOutputKeys(produces: JsonSchema | undefined): string[] {
  if (typeof produces !== "object") {
    return [];
  }
  const { properties, required } = produces;
  return RESERVED_AGENT_OUTPUT_KEYS.filter(
    (key) =>
      (properties !== null &&
        typeof properties === "object" &&
        !Array.isArray(properties) &&
        Object.hasOwn(properties, key)) ||
      (Array.isArray(required) && required.includes(key)),
  );
}

const TOOL_INPUT_SCHEMAS = new Map<ToolName, JsonSchema>();

/**
 * The JSON Schema of a standard library tool's input, as the model is offered
 * it: generated from the tool's zod schema once per tool, without `$schema`. A
 * `pattern` the engine's validator cannot run (lookaround) is left out; the
 * tool checks its input against its own schema when called.
 */
export function toolInputSchema(name: ToolName): JsonSchema {
  let schema = TOOL_INPUT_SCHEMAS.get(name);
  if (schema === undefined) {
    const { $schema: _dialect, ...generated } = z.toJSONSchema(TOOL_SCHEMAS[name].input, {
      io: "input",
      target: "draft-2020-12",
      override(ctx) {
        const pattern = ctx.jsonSchema.pattern;
        if (typeof pattern === "string" && !compileEcmaPattern(pattern).ok) {
          delete ctx.jsonSchema.pattern;
        }
      },
    });
    schema = JsonSchema.parse(generated);
    TOOL_INPUT_SCHEMAS.set(name, schema);
  }
  return schema;
}
