import type { ErrorDetail } from "../lib/errors.ts";
import { secretNamesIn, undeclaredSecretReason } from "../lib/secrets.ts";
import { RESERVED_KEYS } from "../schemas/common.ts";
import { DEFINITION_KINDS, type DefinitionBundle, type DefinitionKind } from "../schemas/definitions.ts";
import { checkAction, checkModel, checkPrompt } from "./check-actions.ts";
import { checkSchedule } from "./check-schedules.ts";
import { checkWebhook } from "./check-webhooks.ts";
import { checkTask, checkWorkflow } from "./check-workflows.ts";
import { mappingsIn } from "./mappings-in.ts";
import { checkHeaders, type CheckContext, type DefinitionLookup, type Report } from "./checks.ts";

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
  const report: Report = (path, message, code) => problems.push({ path, message, code });
  const check: CheckContext = { lookup: withBundle(bundle, stored), report, problems };
  checkDuplicates(bundle, report);
  checkSecretNames(bundle, secrets, report);
  bundle.workflows?.forEach((workflow, i) => checkWorkflow(workflow, `workflows.${i}`, check));
  bundle.tasks?.forEach((task, i) => checkTask(task, `tasks.${i}`, check));
  bundle.actions?.forEach((action, i) => checkAction(action, `actions.${i}`, check));
  bundle.prompts?.forEach((prompt, i) => checkPrompt(prompt, `prompts.${i}`, report, problems));
  bundle.models?.forEach((model, i) => checkModel(model, `models.${i}`, check));
  bundle.mcp_servers?.forEach((server, i) => checkHeaders(server.headers, `mcp_servers.${i}.headers`, report, false));
  bundle.schedules?.forEach((schedule, i) => checkSchedule(schedule, `schedules.${i}`, check));
  bundle.webhooks?.forEach((webhook, i) => checkWebhook(webhook, `webhooks.${i}`, report));
  return problems;
}

/** References may name definitions stored before or registered in the same bundle. */
function withBundle(bundle: DefinitionBundle, stored: DefinitionLookup): DefinitionLookup {
  // A pinned version must already be stored; "latest" may also be registered by this bundle, and then is its.
  const inBundle = (kind: DefinitionKind, id: string, version: number | undefined) =>
    version === undefined ? (bundle[kind] ?? []).find((definition) => definition.id === id) : undefined;
  return {
    exists: (kind, id, version) => inBundle(kind, id, version) !== undefined || stored.exists(kind, id, version),
    read: (kind, id, version) => inBundle(kind, id, version) ?? stored.read(kind, id, version),
  };
}

function checkDuplicates(bundle: DefinitionBundle, report: Report): void {
  for (const kind of DEFINITION_KINDS) {
    const seen = new Set<string>();
    (bundle[kind] ?? []).forEach((definition, i) => {
      if (seen.has(definition.id)) {
        report(`${kind}.${i}.id`, `"${definition.id}" appears twice in this bundle`, "definition.duplicate");
      }
      seen.add(definition.id);
    });
  }
}

/**
 * Reserved names (`__proto__`, `constructor`, `prototype`) as mapping fields
 * or target path segments, found in the raw body: zod drops a `__proto__` key
 * of a record before its key schema sees it, so the parsed bundle cannot show
 * it. Each problem names its path.
 */
export function checkReservedMappingKeys(raw: unknown): ErrorDetail[] {
  return mappingsIn(raw).flatMap(({ mapping, path }) =>
    Object.keys(mapping)
      .filter((field) => field.split(".").some((segment) => RESERVED_KEYS.has(segment)))
      .map((field) => ({
        path: `${path}.${field}`,
        message: `"${field}" uses a reserved name (__proto__, constructor, prototype), which JavaScript gives a meaning on every object; choose another name`,
        code: "definition.reserved_key",
      })),
  );
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
