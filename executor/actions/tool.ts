import { EngineError } from "../../lib/errors.ts";
import { issuesToDetails } from "../../lib/validation.ts";
import { recordable } from "../../lib/recordable.ts";
import type { Json } from "../../schemas/common.ts";
import { isToolName, TOOL_SCHEMAS, type ToolName } from "../../schemas/tools.ts";
import { sandboxFor, type SandboxClient } from "../sandbox-client.ts";
import { STANDARD_TOOLS, type Tool, type ToolContext } from "../tools/index.ts";
import { commandTimeoutMs } from "./shell.ts";
import type { ActionHandler } from "./types.ts";

/** The one version of the standard library so far; `version` may be omitted or `"1"`. */
export const TOOL_LIBRARY_VERSION = "1";

/**
 * `tool`: one standard library tool (executor/tools/, schemas in
 * schemas/tools.ts). Fails closed: the tool must be on the run's allowlist
 * as `tool:<name>` (`workflow.tools`; an empty list allows nothing), else
 * `tool.not_allowed`. The input is checked against the tool's schema
 * (`tool.invalid_input`, with details), and so is its output.
 */
export const toolAction: ActionHandler<"tool"> = {
  async run(action, input, context) {
    const name = action.implementation.tool;
    if (!isToolName(name)) {
      throw EngineError.terminal("tool.unknown", `"${name}" is not a standard library tool`);
    }
    const version = action.implementation.version;
    if (version !== undefined && version !== TOOL_LIBRARY_VERSION) {
      throw EngineError.terminal(
        "tool.unknown_version",
        `tool ${name} has no version "${version}" (the library is at version ${TOOL_LIBRARY_VERSION})`,
      );
    }
    if (!context.payload.tools.includes(`tool:${name}`)) {
      throw EngineError.terminal(
        "tool.not_allowed",
        `tool:${name} is not on this run's allowlist (the workflow's "tools")`,
      );
    }
    const schemas = TOOL_SCHEMAS[name];
    const parsed = schemas.input.safeParse(input);
    if (!parsed.success) {
      throw EngineError.terminal(
        "tool.invalid_input",
        `the input of tool ${name} is invalid`,
        issuesToDetails(parsed.error.issues, "input"),
      );
    }
    let sandbox: SandboxClient | undefined;
    const toolContext: ToolContext = {
      action: context,
      sandbox: () => (sandbox ??= sandboxFor(context, action.implementation.resource_name)),
      artifacts: () => {
        if (context.env.ARTIFACTS === undefined) {
          throw EngineError.terminal("tool.unavailable", "this Worker has no ARTIFACTS bucket binding (wrangler.toml)");
        }
        return context.env.ARTIFACTS;
      },
      defaultTimeoutMs: commandTimeoutMs(action.execution?.timeout_ms),
    };
    const tool = STANDARD_TOOLS[name] as Tool<ToolName>;
    context.note?.({ tool: name, arguments: await recordable(input) });
    const output = await tool.run(parsed.data as never, toolContext);
    const checked = schemas.output.safeParse(output);
    if (!checked.success) {
      throw EngineError.terminal(
        "tool.invalid_output",
        `tool ${name} produced output that does not match its schema`,
        issuesToDetails(checked.error.issues, "output"),
      );
    }
    context.note?.({ result: await recordable(checked.data as Json) });
    return checked.data;
  },
};
