import { z } from "zod";
import {
  ACTION_IMPLEMENTATIONS,
  Action,
  InlineAction,
  InlineUndoAction,
  Undo,
  McpServer,
  Model,
  Prompt,
  type ActionKind,
} from "../../schemas/actions.ts";
import {
  WorkflowChoice,
  InputMapping,
  JsonSchema,
  JsonValue,
  OutputMapping,
  Reference,
  RetryPolicy,
} from "../../schemas/common.ts";
import { DefinitionBundle, InlineTask, Node, Step, Task, Workflow } from "../../schemas/definitions.ts";
import { Webhook } from "../../schemas/webhooks.ts";

/**
 * Zod schemas → JSON Schema (draft 2020-12), for the contracts served and
 * committed under schemas/json/ (docs/api.md "Machine-readable contracts").
 *
 * What zod cannot say in JSON Schema is left to the server: refinements and
 * `.check`s (a node runs exactly one of task or workflow, a retry policy's
 * delays, a bundle holds at least one definition) are not in the output, and
 * neither is what registration checks beyond the schema (references that
 * resolve, CEL that parses, no cycle). The JSON Schema is what an editor can
 * check while a definition is typed; registration remains the judge.
 */

/** A JSON Schema object, as zod emits it. */
export type JsonSchemaObject = z.core.JSONSchema.BaseSchema;

/**
 * The bounds zod adds to every `.int()` (±2^53−1): true of every JSON number a
 * Worker can hold, so they say nothing to a reader and are left out.
 */
const SAFE_INTEGER_BOUNDS = { minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER } as const;

/**
 * The options every conversion shares: `JsonValue` (a custom schema, one walk
 * over any JSON) becomes `{}`, named `JsonValue` wherever the conversion's
 * registry has it, and the safe-integer bounds go.
 */
export function conversionOptions(io: "input" | "output"): z.core.ToJSONSchemaParams {
  return {
    io,
    target: "draft-2020-12",
    unrepresentable: representJsonValue,
    override(ctx) {
      if (ctx.jsonSchema.minimum === SAFE_INTEGER_BOUNDS.minimum) {
        delete ctx.jsonSchema.minimum;
      }
      if (ctx.jsonSchema.maximum === SAFE_INTEGER_BOUNDS.maximum) {
        delete ctx.jsonSchema.maximum;
      }
    },
  };
}

/**
 * `JsonValue` is custom (a walk, not a union), which zod cannot represent: it
 * becomes `{}` (any JSON value). Its `.superRefine` made it a clone of a bare
 * `z.custom()`, which zod meets first, hence the parent. Any other custom
 * schema still throws, so a new one cannot slip into the contracts as "any".
 */
function representJsonValue(ctx: { zodSchema: z.core.$ZodTypes }): z.core.JSONSchema.BaseSchema | "throw" {
  return ctx.zodSchema === JsonValue || ctx.zodSchema === JsonValue._zod.parent ? {} : "throw";
}

/** Each kind's implementation, named for the JSON Schema's `$defs` (`HttpImplementation`, …). */
function implementationName(kind: ActionKind): string {
  return `${kind.charAt(0).toUpperCase()}${kind.slice(1)}Implementation`;
}

/**
 * The schemas of the definition language that get a name of their own (a
 * `$defs` entry an editor can show), with the one-line description it shows.
 */
export const DEFINITION_PARTS: [z.ZodType, string, string][] = [
  [Workflow, "Workflow", "A workflow: nodes forming a DAG through depends_on (docs/definitions.md#workflow)."],
  [Node, "Node", 'A node: runs exactly one of "task" or "workflow" (docs/definitions.md#node).'],
  [Task, "Task", "A task: steps run in array order (docs/definitions.md#task)."],
  [InlineTask, "InlineTask", "A task written inline in a node; its id is optional."],
  [Step, "Step", "A step: calls one action (docs/definitions.md#step)."],
  [Action, "Action", "An action; its kind selects the implementation fields (docs/definitions.md#action)."],
  [InlineAction, "InlineAction", "An action written inline in a step; its id is optional."],
  [Undo, "Undo", "What undoes a completed call of the action (docs/definitions.md#undo-and-compensation)."],
  [InlineUndoAction, "InlineUndoAction", "An undo's action written inline: an action without an undo of its own."],
  [
    WorkflowChoice,
    "WorkflowChoice",
    "A child workflow chosen at run time (docs/definitions.md#choosing-work-at-run-time).",
  ],
  [Prompt, "Prompt", "A prompt: messages rendered with Handlebars over the action input."],
  [Model, "Model", "A model: provider, model_id, and credentials written $env:NAME."],
  [McpServer, "McpServer", "An MCP server: url, headers (credentials written $env:NAME), allowed_tools."],
  [
    Webhook,
    "Webhook",
    "A webhook: how its deliveries are verified and the event each becomes (docs/definitions.md#webhooks).",
  ],
  [Reference, "Reference", 'A reference: "id" (latest at run start) or "id@3" (pinned).'],
  [RetryPolicy, "RetryPolicy", "Exponential backoff; max_delay_ms must not be less than initial_delay_ms."],
  [JsonSchema, "JsonSchema", "A JSON Schema (draft 2020-12), checked at registration."],
  [
    InputMapping,
    "InputMapping",
    '{ "<field>": <source> }: a "$…" JSONPath, { "expr" }, { "template" }, { "path", "default" | "optional" }, { "concat" } or a literal.',
  ],
  [OutputMapping, "OutputMapping", '{ "state.…" | "output.…": <source> }: writes the callee\'s output.'],
  [JsonValue, "JsonValue", "any JSON value"],
  ...(Object.keys(ACTION_IMPLEMENTATIONS) as ActionKind[]).map((kind): [z.ZodType, string, string] => [
    ACTION_IMPLEMENTATIONS[kind],
    implementationName(kind),
    `The implementation of an action of kind "${kind}" (docs/definitions.md#implementation-per-kind).`,
  ]),
];

/** A registry naming `parts`, so each becomes one `$defs` (or `components`) entry. */
export function namedRegistry(
  parts: [z.ZodType, string, string][],
): z.core.$ZodRegistry<{ id: string; description: string }> {
  const registry = z.registry<{ id: string; description: string }>();
  for (const [schema, id, description] of parts) {
    registry.add(schema, { id, description });
  }
  return registry;
}

/**
 * The JSON Schema of a definition bundle (`POST /v1/definitions`), as the
 * user writes it (`io: "input"`: optional fields stay optional). Every strict
 * zod object is `additionalProperties: false`, so a typo'd field is flagged.
 */
export function definitionsJsonSchema(): JsonSchemaObject {
  const generated = z.toJSONSchema(DefinitionBundle, {
    ...conversionOptions("input"),
    metadata: namedRegistry(DEFINITION_PARTS),
  });
  return {
    $schema: generated.$schema,
    title: "Trellis definition bundle",
    description:
      "The body of POST /v1/definitions: workflows, tasks, actions, prompts, models, mcp_servers and webhooks " +
      "(docs/definitions.md). Generated from schemas/ by `npm run schemas`; do not edit.",
    ...withoutKeys(generated, ["$schema"]),
  };
}

/** `object` without the given keys. */
export function withoutKeys(object: JsonSchemaObject, keys: string[]): JsonSchemaObject {
  return Object.fromEntries(Object.entries(object).filter(([key]) => !keys.includes(key)));
}
