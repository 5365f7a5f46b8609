import { Action, Model, Prompt, type ActionImplementation, type InlineModel } from "../schemas/actions.ts";
import { parseReference } from "../schemas/common.ts";
import type { DefinitionKind } from "../schemas/definitions.ts";
import { isToolName, TOOL_NAMES } from "../schemas/tools.ts";
import { checkReference, type CheckContext } from "./checks.ts";
import {
  AGENT_FIELDS,
  reservedOutputKeys,
  toolActionRefusal,
  toolEntry,
  toolName,
  type ToolEntry,
} from "./llm-tools.ts";

type LlmImplementation = ActionImplementation<"llm">;

/**
 * What an `llm` action's tools need beyond their schema (docs/definitions.md,
 * "Agents"): each tool's action must exist and be one call, each name must be
 * valid and unique; the loop's fields need tools; the prompt's `produces` may
 * not declare the loop's output keys; a cost budget needs priced models. An
 * inline tool action is checked as any action by the caller (check-actions.ts).
 */
export function checkAgent(implementation: LlmImplementation, at: string, check: CheckContext): void {
  const { tools } = implementation;
  if (tools === undefined) {
    for (const field of AGENT_FIELDS.filter((name) => implementation[name] !== undefined)) {
      check.report(
        `${at}.${field}`,
        `"${field}" applies only to an llm action with "tools", and this one has none`,
        "definition.missing_tools",
      );
    }
    return;
  }
  const named = new Map<string, number>();
  tools.forEach((tool, i) => {
    const path = `${at}.tools.${i}`;
    const entry = toolEntry(tool);
    checkToolAction(entry, typeof tool === "string" ? path : `${path}.action`, check);
    if (entry.pin !== undefined && entry.target.kind !== "mcp") {
      check.report(`${path}.pin`, 'a "pin" applies only to an "mcp:<server>/<tool>" tool', "definition.invalid_tool");
    }
    const name = toolName(entry);
    const namePath = typeof tool === "string" ? path : `${path}.name`;
    if ("problem" in name) {
      check.report(namePath, name.problem, "definition.invalid_tool");
    } else if (named.has(name.name)) {
      check.report(
        namePath,
        `tools.${named.get(name.name)} is named "${name.name}" too: the model tells tools apart by name`,
        "definition.duplicate_tool",
      );
    } else {
      named.set(name.name, i);
    }
  });
  checkReservedKeys(implementation.prompt, `${at}.prompt`, check);
  if (implementation.budget?.cost_usd !== undefined) {
    checkPricing(implementation, at, check);
  }
}

/** The action a tool names must exist and be one call. */
function checkToolAction({ target }: ToolEntry, path: string, check: CheckContext): void {
  switch (target.kind) {
    case "action": {
      checkReference("actions", target.ref, path, check.lookup, check.report);
      const action = Action.safeParse(read(check, "actions", target.ref));
      const refusal = action.success ? toolActionRefusal(action.data) : undefined;
      if (refusal !== undefined) {
        check.report(path, `"${target.ref}": ${refusal}`, "definition.invalid_tool");
      }
      return;
    }
    case "mcp":
      checkReference("mcp_servers", target.server, path, check.lookup, check.report);
      return;
    case "std":
      if (!isToolName(target.tool)) {
        check.report(
          path,
          `"${target.tool}" is not a standard library tool (known: ${TOOL_NAMES.join(", ")})`,
          "definition.unknown_tool",
        );
      }
      return;
    case "inline": {
      const refusal = toolActionRefusal(target.action);
      if (refusal !== undefined) {
        check.report(path, refusal, "definition.invalid_tool");
      }
    }
  }
}

/** The loop reports `tool_calls`, `turns` and `usage` beside the answer: the prompt's `produces` cannot claim them. */
function checkReservedKeys(prompt: LlmImplementation["prompt"], path: string, check: CheckContext): void {
  const written = typeof prompt === "string" ? Prompt.safeParse(read(check, "prompts", prompt)).data : prompt;
  for (const key of reservedOutputKeys(written?.produces)) {
    check.report(
      typeof prompt === "string" ? path : `${path}.produces`,
      `the prompt's "produces" declares "${key}", which an llm action with tools reports beside the answer`,
      "definition.reserved_output_key",
    );
  }
}

/** `budget.cost_usd` is counted from each model's `pricing`: the model and every fallback must have one. */
function checkPricing(implementation: LlmImplementation, at: string, check: CheckContext): void {
  const models: [string | InlineModel, string][] = [
    [implementation.model, `${at}.model`],
    ...(implementation.fallback_models ?? []).map((model, i): [string | InlineModel, string] => [
      model,
      `${at}.fallback_models.${i}`,
    ]),
  ];
  for (const [model, path] of models) {
    const written = typeof model === "string" ? Model.safeParse(read(check, "models", model)).data : model;
    if (written !== undefined && written.pricing === undefined) {
      check.report(
        path,
        `budget.cost_usd is counted from each model's "pricing", and ${typeof model === "string" ? `"${model}"` : "this model"} has none`,
        "definition.missing_pricing",
      );
    }
  }
}

/** What a reference names, as stored or in the bundle; undefined when it names nothing (`checkReference` reports that). */
function read(check: CheckContext, kind: DefinitionKind, ref: string): unknown {
  const parsed = parseReference(ref);
  return parsed === undefined ? undefined : check.lookup.read(kind, parsed.id, parsed.version);
}
