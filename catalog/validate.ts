import type { ErrorDetail } from "../lib/errors.ts";
import { compileCel } from "../lib/expr/cel.ts";
import { compileJsonPath } from "../lib/expr/jsonpath.ts";
import { isComputed } from "../lib/expr/mapping.ts";
import { compileTemplate } from "../lib/expr/template.ts";
import { checkJsonSchema, validateJson } from "../lib/json-schema.ts";
import { secretNamesIn, undeclaredSecretReason } from "../lib/secrets.ts";
import {
  CREDENTIAL_VALUE_PATTERN,
  isCredentialHeader,
  isToolName,
  parseReference,
  RESERVED_KEYS,
  SECRET_REF_PATTERN,
  TOOL_NAMES,
  type ActionImplementation,
  type DefinitionBundle,
  type DefinitionKind,
  type InlineAction,
  type InlineTask,
  type InputMapping,
  type Model,
  type OutputMapping,
  type Prompt,
  type Step,
  type Workflow,
} from "../schemas/index.ts";

/**
 * What registration needs to know about definitions already stored: whether
 * `id` (any version) or `id@version` exists.
 */
export interface DefinitionLookup {
  exists(kind: DefinitionKind, id: string, version: number | undefined): boolean;
}

/**
 * The checks zod cannot make: expressions that must parse (CEL, JSONPath,
 * Handlebars), JSON Schemas that must be valid, references that must resolve,
 * DAGs without cycles, and credentials that must be `$env:` references.
 * Returns every problem, each with its dotted path in the bundle.
 */
export function checkBundle(
  bundle: DefinitionBundle,
  stored: DefinitionLookup,
  secrets: ReadonlySet<string>,
): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  const lookup = withBundle(bundle, stored);
  const report = (path: string, message: string, code: string) => problems.push({ path, message, code });
  checkDuplicates(bundle, report);
  checkSecretNames(bundle, secrets, report);
  bundle.workflows?.forEach((workflow, i) => checkWorkflow(workflow, `workflows.${i}`, lookup, report, problems));
  bundle.tasks?.forEach((task, i) => checkTask(task, `tasks.${i}`, lookup, report, problems));
  bundle.actions?.forEach((action, i) => checkAction(action, `actions.${i}`, lookup, report, problems));
  bundle.prompts?.forEach((prompt, i) => checkPrompt(prompt, `prompts.${i}`, report, problems));
  bundle.models?.forEach((model, i) => checkModel(model, `models.${i}`, report));
  bundle.mcp_servers?.forEach((server, i) => checkHeaders(server.headers, `mcp_servers.${i}.headers`, report, false));
  return problems;
}

type Report = (path: string, message: string, code: string) => void;

/** References may name definitions stored before or registered in the same bundle. */
function withBundle(bundle: DefinitionBundle, stored: DefinitionLookup): DefinitionLookup {
  return {
    exists(kind, id, version) {
      // A pinned version must already be stored; "latest" may also be registered by this bundle.
      const inBundle = version === undefined && (bundle[kind] ?? []).some((definition) => definition.id === id);
      return inBundle || stored.exists(kind, id, version);
    },
  };
}

function checkDuplicates(bundle: DefinitionBundle, report: Report): void {
  for (const kind of ["workflows", "tasks", "actions", "prompts", "models", "mcp_servers"] as const) {
    const seen = new Set<string>();
    (bundle[kind] ?? []).forEach((definition, i) => {
      if (seen.has(definition.id)) {
        report(`${kind}.${i}.id`, `"${definition.id}" appears twice in this bundle`, "definition.duplicate");
      }
      seen.add(definition.id);
    });
  }
}

function checkReference(
  kind: DefinitionKind,
  ref: string,
  path: string,
  lookup: DefinitionLookup,
  report: Report,
): void {
  const parsed = parseReference(ref);
  if (!parsed) {
    report(path, `"${ref}" is not a reference ("id" or "id@version")`, "definition.bad_reference");
    return;
  }
  if (!lookup.exists(kind, parsed.id, parsed.version)) {
    const what =
      parsed.version === undefined
        ? `no ${singular(kind)} "${parsed.id}"`
        : `no version ${parsed.version} of ${singular(kind)} "${parsed.id}"`;
    report(path, `${what} is registered or in this bundle`, "definition.unknown_reference");
  }
}

function singular(kind: DefinitionKind): string {
  return kind === "mcp_servers" ? "mcp server" : kind.slice(0, -1);
}

function checkWorkflow(
  workflow: Workflow,
  path: string,
  lookup: DefinitionLookup,
  report: Report,
  problems: ErrorDetail[],
): void {
  checkSchema(workflow.input_schema, `${path}.input_schema`, problems);
  checkSchema(workflow.output_schema, `${path}.output_schema`, problems);
  const nodeIds = new Set(Object.keys(workflow.nodes));
  for (const [nodeId, node] of Object.entries(workflow.nodes)) {
    const nodePath = `${path}.nodes.${nodeId}`;
    if (typeof node.task === "string") {
      checkReference("tasks", node.task, `${nodePath}.task`, lookup, report);
    } else if (node.task) {
      checkTask(node.task, `${nodePath}.task`, lookup, report, problems);
    }
    if (node.workflow !== undefined) {
      checkReference("workflows", node.workflow, `${nodePath}.workflow`, lookup, report);
    }
    node.depends_on?.forEach((dependency, i) => {
      if (dependency === nodeId) {
        report(`${nodePath}.depends_on.${i}`, `node "${nodeId}" depends on itself`, "workflow.cycle");
      } else if (!nodeIds.has(dependency)) {
        report(`${nodePath}.depends_on.${i}`, `no node "${dependency}" in this workflow`, "workflow.unknown_node");
      }
    });
    checkCel(node.when, `${nodePath}.when`, report);
    checkCel(node.repeat?.until, `${nodePath}.repeat.until`, report);
    if (node.foreach) {
      checkJsonPath(node.foreach.items, `${nodePath}.foreach.items`, report);
    }
    checkMappings(node.input_mapping, `${nodePath}.input_mapping`, report);
    checkMappings(node.output_mapping, `${nodePath}.output_mapping`, report);
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
  const cycle = findCycle(workflow);
  if (cycle) {
    report(`${path}.nodes.${cycle[0]}.depends_on`, `depends_on forms a cycle: ${cycle.join(" → ")}`, "workflow.cycle");
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

function checkTask(
  task: InlineTask,
  path: string,
  lookup: DefinitionLookup,
  report: Report,
  problems: ErrorDetail[],
): void {
  checkSchema(task.input_schema, `${path}.input_schema`, problems);
  checkSchema(task.output_schema, `${path}.output_schema`, problems);
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
      checkAction(step.action, `${stepPath}.action`, lookup, report, problems);
    }
    checkCel(step.condition?.if, `${stepPath}.condition.if`, report);
    checkMappings(step.input_mapping, `${stepPath}.input_mapping`, report);
    checkMappings(step.output_mapping, `${stepPath}.output_mapping`, report);
  });
}

/** Per kind, the implementation fields that need more than their schema. */
function checkAction(
  action: InlineAction,
  path: string,
  lookup: DefinitionLookup,
  report: Report,
  problems: ErrorDetail[],
): void {
  checkSchema(action.requires, `${path}.requires`, problems);
  checkSchema(action.produces, `${path}.produces`, problems);
  const at = `${path}.implementation`;
  switch (action.kind) {
    case "context":
      action.implementation.updates.forEach((update, i) => checkCel(update.expr, `${at}.updates.${i}.expr`, report));
      return;
    case "http":
      checkTemplate(action.implementation.url_template, `${at}.url_template`, report);
      checkTemplate(action.implementation.body_template, `${at}.body_template`, report);
      checkHeaders(action.implementation.headers, `${at}.headers`, report, true);
      return;
    case "llm":
      checkPromptOrModel(action.implementation.prompt, "prompts", `${at}.prompt`, lookup, report, problems);
      checkPromptOrModel(action.implementation.model, "models", `${at}.model`, lookup, report, problems);
      return;
    case "mcp":
      checkReference("mcp_servers", action.implementation.server, `${at}.server`, lookup, report);
      return;
    case "shell":
      checkTemplate(action.implementation.command_template, `${at}.command_template`, report);
      checkTemplate(action.implementation.working_dir, `${at}.working_dir`, report);
      for (const [name, template] of Object.entries(action.implementation.env ?? {})) {
        checkTemplate(template, `${at}.env.${name}`, report);
      }
      return;
    case "workflow":
      checkReference("workflows", action.implementation.workflow, `${at}.workflow`, lookup, report);
      return;
    case "human":
      checkTemplate(action.implementation.prompt_template, `${at}.prompt_template`, report);
      checkSchema(action.implementation.input_schema, `${at}.input_schema`, problems);
      if (typeof action.implementation.on_timeout === "object" && problems.length === 0) {
        // The default answer stands in for a human's: it must be one they could have given.
        for (const problem of validateJson(
          action.implementation.input_schema,
          action.implementation.on_timeout.default,
          `${at}.on_timeout.default`,
        )) {
          report(problem.path, problem.message, "definition.invalid_default");
        }
      }
      return;
    case "vector":
      checkVector(action.implementation, at, report);
      return;
    case "metric":
      if (typeof action.implementation.value === "object") {
        checkCel(action.implementation.value.expr, `${at}.value.expr`, report);
      }
      checkMappings(action.implementation.dimensions, `${at}.dimensions`, report);
      return;
    case "tool":
      if (!isToolName(action.implementation.tool)) {
        report(
          `${at}.tool`,
          `"${action.implementation.tool}" is not a standard library tool (known: ${TOOL_NAMES.join(", ")})`,
          "definition.unknown_tool",
        );
      }
      return;
  }
}

function checkPromptOrModel(
  value: string | Omit<Prompt, "id"> | Omit<Model, "id">,
  kind: "prompts" | "models",
  path: string,
  lookup: DefinitionLookup,
  report: Report,
  problems: ErrorDetail[],
): void {
  if (typeof value === "string") {
    checkReference(kind, value, path, lookup, report);
  } else if ("messages" in value) {
    checkPrompt(value, path, report, problems);
  } else {
    checkModel(value, path, report);
  }
}

function checkPrompt(prompt: Omit<Prompt, "id">, path: string, report: Report, problems: ErrorDetail[]): void {
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

function checkModel(model: Omit<Model, "id">, path: string, report: Report): void {
  checkSecret(model.api_key, `${path}.api_key`, report);
  if (model.provider === "openai-compatible" && model.base_url === undefined) {
    report(
      `${path}.base_url`,
      'an "openai-compatible" model needs a base_url (the server\'s OpenAI-style API root, e.g. http://host/v1)',
      "definition.missing_base_url",
    );
  }
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

function checkMappings(mapping: InputMapping | OutputMapping | undefined, path: string, report: Report): void {
  for (const [key, source] of Object.entries(mapping ?? {})) {
    const at = `${path}.${key}`;
    if (typeof source === "string" && source.startsWith("$")) {
      checkJsonPath(source, at, report);
    } else if (isComputed(source, "expr")) {
      checkCel(source.expr, `${at}.expr`, report);
    } else if (isComputed(source, "template")) {
      checkTemplate(source.template, `${at}.template`, report);
    }
  }
}

function checkCel(source: string | undefined, path: string, report: Report): void {
  if (source === undefined) {
    return;
  }
  const compiled = compileCel(source);
  if (!compiled.ok) {
    report(path, `CEL does not parse: ${compiled.message}`, "definition.invalid_cel");
  }
}

function checkJsonPath(source: string, path: string, report: Report): void {
  const compiled = compileJsonPath(source);
  if (!compiled.ok) {
    report(path, `JSONPath is not valid: ${compiled.message}`, "definition.invalid_jsonpath");
  }
}

function checkTemplate(source: string | undefined, path: string, report: Report): void {
  if (source === undefined) {
    return;
  }
  const compiled = compileTemplate(source);
  if (!compiled.ok) {
    const why = compiled.code === "template.too_deep" ? "Handlebars nests too deep" : "Handlebars does not parse";
    report(
      path,
      `${why}: ${compiled.message}`,
      compiled.code === "template.too_deep" ? "definition.template_too_deep" : "definition.invalid_template",
    );
  }
}

function checkSchema(schema: unknown, path: string, problems: ErrorDetail[]): void {
  if (schema !== undefined) {
    problems.push(...checkJsonSchema(schema, path));
  }
}

/**
 * Reserved names (`__proto__`, `constructor`, `prototype`) as mapping fields
 * or target path segments, found in the raw body: zod drops a `__proto__` key
 * of a record before its key schema sees it, so the parsed bundle cannot show
 * it. Each problem names its path.
 */
export function checkReservedMappingKeys(raw: unknown): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  const stack: { value: unknown; path: string }[] = [{ value: raw, path: "" }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    if (value === null || typeof value !== "object") {
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      const at = path === "" ? key : `${path}.${key}`;
      if (
        (key === "input_mapping" || key === "output_mapping") &&
        item !== null &&
        typeof item === "object" &&
        !Array.isArray(item)
      ) {
        for (const field of Object.keys(item)) {
          if (field.split(".").some((segment) => RESERVED_KEYS.has(segment))) {
            problems.push({
              path: `${at}.${field}`,
              message: `"${field}" uses a reserved name (__proto__, constructor, prototype), which JavaScript gives a meaning on every object; choose another name`,
              code: "definition.reserved_key",
            });
          }
        }
      }
      stack.push({ value: item, path: at });
    }
  }
  return problems;
}

/**
 * Every `$env:NAME` anywhere in the bundle must name a declared workflow
 * secret (lib/secrets.ts): the engine's own secrets and undeclared names are
 * refused here, wherever they stand, so no field (today's or a future one
 * that resolves secrets) can reach them.
 */
function checkSecretNames(bundle: DefinitionBundle, declared: ReadonlySet<string>, report: Report): void {
  const stack: { value: unknown; path: string }[] = [{ value: bundle, path: "" }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    if (typeof value === "string") {
      for (const name of new Set(secretNamesIn(value))) {
        const reason = undeclaredSecretReason(name, declared);
        if (reason !== undefined) {
          report(path, reason, "definition.undeclared_secret");
        }
      }
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push({ value: item, path: `${path}.${index}` }));
    } else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) {
        stack.push({ value: item, path: path === "" ? key : `${path}.${key}` });
      }
    }
  }
}

function checkSecret(value: string | undefined, path: string, report: Report): void {
  if (value !== undefined && !SECRET_REF_PATTERN.test(value)) {
    report(
      path,
      'credentials must be written "$env:NAME" and set as a Worker secret, never literal',
      "definition.literal_secret",
    );
  }
}

function checkHeaders(
  headers: Record<string, string> | undefined,
  path: string,
  report: Report,
  templated: boolean,
): void {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (isCredentialHeader(name) && !CREDENTIAL_VALUE_PATTERN.test(value)) {
      report(
        `${path}.${name}`,
        `the "${name}" header carries a credential: write it as "$env:NAME" (or "Bearer $env:NAME"), never literal`,
        "definition.literal_secret",
      );
    } else if (templated) {
      checkTemplate(value, `${path}.${name}`, report);
    }
  }
}
