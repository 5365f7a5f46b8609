import type { ErrorDetail } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import {
  ACTION_TRAITS,
  type ActionImplementation,
  type ActionKind,
  type InlineAction,
  type Model,
  type Prompt,
} from "../schemas/actions.ts";
import { parseReference } from "../schemas/common.ts";
import { ToolGrant } from "../schemas/definitions.ts";
import { isToolName, TOOL_NAMES } from "../schemas/tools.ts";
import { checkLimitUses } from "./check-limits.ts";
import { checkAgent } from "./check-tools.ts";
import {
  CEL_SCOPES,
  checkCel,
  checkHeaders,
  checkJsonPath,
  checkMappings,
  checkReference,
  checkSchema,
  checkSecret,
  checkSourceLeaves,
  checkTemplate,
  type CheckContext,
  type Report,
} from "./checks.ts";

/** The checks one kind's implementation needs beyond its schema; `at` is the implementation's path. */
export type ImplementationCheck<K extends ActionKind> = (
  implementation: ActionImplementation<K>,
  at: string,
  check: CheckContext,
) => void;

/** One check per action kind: a kind added to the schema table fails to compile until it has its row here. */
export type ImplementationChecks = { [K in ActionKind]: ImplementationCheck<K> };

/** Per kind, the implementation fields that need more than their schema. */
export const IMPLEMENTATION_CHECKS: ImplementationChecks = {
  context: (implementation, at, { report }) =>
    implementation.updates.forEach((update, i) =>
      checkCel(update.expr, `${at}.updates.${i}.expr`, report, CEL_SCOPES.actionInput),
    ),
  http: (implementation, at, { report }) => {
    checkTemplate(implementation.url_template, `${at}.url_template`, report);
    checkTemplate(implementation.body_template, `${at}.body_template`, report);
    checkHeaders(implementation.headers, `${at}.headers`, report, true);
    checkHttpBody(implementation, at, report);
  },
  llm: (implementation, at, check) => {
    checkPromptOrModel(implementation.prompt, "prompts", `${at}.prompt`, check);
    checkPromptOrModel(implementation.model, "models", `${at}.model`, check);
    implementation.fallback_models?.forEach((model, i) =>
      checkPromptOrModel(model, "models", `${at}.fallback_models.${i}`, check),
    );
    checkAgent(implementation, at, check);
    implementation.tools?.forEach((tool, i) => {
      // An inline tool action is an action like any other (a registered one was checked when it was registered).
      if (typeof tool === "object" && typeof tool.action === "object") {
        checkAction(tool.action, `${at}.tools.${i}.action`, check);
      }
    });
  },
  mcp: (implementation, at, { lookup, report }) =>
    checkReference("mcp_servers", implementation.server, `${at}.server`, lookup, report),
  shell: (implementation, at, { report }) => {
    checkTemplate(implementation.command_template, `${at}.command_template`, report);
    checkTemplate(implementation.working_dir, `${at}.working_dir`, report);
    for (const [name, template] of Object.entries(implementation.env ?? {})) {
      checkTemplate(template, `${at}.env.${name}`, report);
    }
  },
  workflow: (implementation, at, { lookup, report }) => {
    const workflow = implementation.workflow;
    if (typeof workflow === "string") {
      checkReference("workflows", workflow, `${at}.workflow`, lookup, report);
      return;
    }
    checkJsonPath(workflow.from, `${at}.workflow.from`, report);
    workflow.allowed.forEach((ref, i) =>
      checkReference("workflows", ref, `${at}.workflow.allowed.${i}`, lookup, report),
    );
  },
  human: checkHuman,
  event: (implementation, at, { report }) => {
    if (implementation.match !== undefined) {
      checkCel(implementation.match, `${at}.match`, report, CEL_SCOPES.eventMatch);
    }
  },
  sleep: (implementation, at, { report }) => {
    if (implementation.duration_ms !== undefined && implementation.until !== undefined) {
      report(at, "set duration_ms or until, not both (the step's input may carry either)", "definition.invalid_sleep");
    }
  },
  vector: (implementation, at, { report }) => checkVector(implementation, at, report),
  metric: (implementation, at, { report }) => {
    if (typeof implementation.value === "object") {
      checkCel(implementation.value.expr, `${at}.value.expr`, report, CEL_SCOPES.actionInput);
    }
    checkMappings(implementation.dimensions, `${at}.dimensions`, report, CEL_SCOPES.actionInput);
  },
  plan: (implementation, at, { report }) =>
    implementation.tools.forEach((grant, i) => checkPlanGrant(grant, `${at}.tools.${i}`, report)),
  tool: (implementation, at, { report }) => {
    if (!isToolName(implementation.tool)) {
      report(
        `${at}.tool`,
        `"${implementation.tool}" is not a standard library tool (known: ${TOOL_NAMES.join(", ")})`,
        "definition.unknown_tool",
      );
    }
  },
};

/**
 * A `plan` action's grant is one of the forms a plan step names (docs/plans.md,
 * "What a step calls"): a registered action (`id`, `id@n`), a standard library
 * tool (`tool:<name>`), an MCP tool (`mcp:<server>/<tool>` or `mcp:<server>/*`).
 */
function checkPlanGrant(grant: string, at: string, report: Report): void {
  if (grant.startsWith("tool:")) {
    if (!isToolName(grant.slice("tool:".length))) {
      report(
        at,
        `"${grant}" is not a standard library tool (known: ${TOOL_NAMES.join(", ")})`,
        "definition.unknown_tool",
      );
    }
    return;
  }
  const known = grant.startsWith("mcp:") ? ToolGrant.safeParse(grant).success : parseReference(grant) !== undefined;
  if (!known) {
    report(
      at,
      `"${grant}" names no action ("id" or "id@n"), standard tool ("tool:<name>") or MCP tool ("mcp:<server>/<tool>")`,
      "definition.invalid_grant",
    );
  }
}

/** An action's schemas, then what its kind's implementation needs (`IMPLEMENTATION_CHECKS`). */
export function checkAction(action: InlineAction, path: string, check: CheckContext): void {
  checkSchema(action.requires, `${path}.requires`, check.problems);
  checkSchema(action.produces, `${path}.produces`, check.problems);
  checkImplementation(action.kind, action.implementation, `${path}.implementation`, check);
  if (action.approvers !== undefined && action.risk !== "high") {
    check.report(
      `${path}.approvers`,
      'approvers answer the approval of a high-risk action: set risk: "high" (a human step names its approvers in implementation.approvers)',
      "definition.invalid_approvers",
    );
  }
  if (action.undo !== undefined) {
    checkUndo(action.undo, `${path}.undo`, check);
  }
  checkLimitUses(action.limits, `${path}.limits`, action.kind === "llm" ? "llm" : "action", check);
}

/** An undo's action (a registered one, or inline and checked as any action) and its mapping over `{ input, output }`. */
function checkUndo(undo: NonNullable<InlineAction["undo"]>, path: string, check: CheckContext): void {
  checkMappings(undo.input_mapping, `${path}.input_mapping`, check.report, CEL_SCOPES.undo);
  if (typeof undo.action === "string") {
    checkReference("actions", undo.action, `${path}.action`, check.lookup, check.report);
    return;
  }
  if (ACTION_TRAITS[undo.action.kind].suspends || undo.action.risk === "high") {
    check.report(
      `${path}.action`,
      "an undo cannot be a human, workflow, sleep, event, plan or high-risk action: a compensation runs it as one call, with nothing to wait for",
      "definition.invalid_undo",
    );
  }
  checkAction(undo.action, `${path}.action`, check);
}

function checkImplementation<K extends ActionKind>(
  kind: K,
  implementation: ActionImplementation<K>,
  at: string,
  check: CheckContext,
): void {
  IMPLEMENTATION_CHECKS[kind](implementation, at, check);
}

function checkHuman(implementation: ActionImplementation<"human">, at: string, check: CheckContext): void {
  checkTemplate(implementation.prompt_template, `${at}.prompt_template`, check.report);
  checkSchema(implementation.input_schema, `${at}.input_schema`, check.problems);
  if (typeof implementation.on_timeout === "object" && check.problems.length === 0) {
    // The default answer stands in for a human's: it must be one they could have given.
    for (const problem of validateJson(
      implementation.input_schema,
      implementation.on_timeout.default,
      `${at}.on_timeout.default`,
    )) {
      check.report(problem.path, problem.message, "definition.invalid_default");
    }
  }
}

function checkPromptOrModel(
  value: string | Omit<Prompt, "id"> | Omit<Model, "id">,
  kind: "prompts" | "models",
  path: string,
  check: CheckContext,
): void {
  if (typeof value === "string") {
    checkReference(kind, value, path, check.lookup, check.report);
  } else if ("messages" in value) {
    checkPrompt(value, path, check.report, check.problems);
  } else {
    checkModel(value, path, check);
  }
}

export function checkPrompt(prompt: Omit<Prompt, "id">, path: string, report: Report, problems: ErrorDetail[]): void {
  prompt.messages.forEach((message, i) => checkTemplate(message.template, `${path}.messages.${i}.template`, report));
  checkSchema(prompt.produces, `${path}.produces`, problems);
  // The step output is the parsed object plus `_meta`, and providers' structured output wants an object at the root.
  const produces = prompt.produces;
  if (typeof produces === "object" && produces.type !== undefined && produces.type !== "object") {
    report(
      `${path}.produces.type`,
      'a prompt\'s "produces" must describe a JSON object ("type": "object")',
      "definition.invalid_produces",
    );
  }
}

export function checkModel(model: Omit<Model, "id">, path: string, check: CheckContext): void {
  checkSecret(model.api_key, `${path}.api_key`, check.report);
  checkLimitUses(model.limits, `${path}.limits`, "model", check);
  if (model.provider === "openai-compatible" && model.base_url === undefined) {
    check.report(
      `${path}.base_url`,
      'an "openai-compatible" model needs a base_url (the server\'s OpenAI-style API root, e.g. http://host/v1)',
      "definition.missing_base_url",
    );
  }
}

/** `body`'s sources see `{ input }`, as a metric's dimensions; a request has one body, so not also `body_template`. */
function checkHttpBody(implementation: ActionImplementation<"http">, at: string, report: Report): void {
  if (implementation.body === undefined) {
    return;
  }
  if (implementation.body_template !== undefined) {
    report(
      `${at}.body`,
      'an http action has "body" (JSON the engine serializes) or "body_template" (text it renders), not both',
      "definition.invalid_http_body",
    );
  }
  checkSourceLeaves(implementation.body, `${at}.body`, report, CEL_SCOPES.actionInput);
}

function checkVector(implementation: ActionImplementation<"vector">, at: string, report: Report): void {
  checkTemplate(implementation.query_template, `${at}.query_template`, report);
  checkTemplate(implementation.text_template, `${at}.text_template`, report);
  if (implementation.vector !== undefined) {
    checkJsonPath(implementation.vector, `${at}.vector`, report);
  }
  const sources = [implementation.query_template, implementation.vector].filter(
    (source) => source !== undefined,
  ).length;
  if ((implementation.operation ?? "query") === "query" && sources !== 1) {
    report(
      at,
      'a vector query needs exactly one of "query_template" (text to embed) or "vector" (a JSONPath to the query vector in the input)',
      "definition.invalid_vector",
    );
  }
}
