import type { Json, JsonObject, JsonSchema } from "../../schemas/common.ts";

/**
 * How a workflow's JSON Schemas become its MCP tool's (docs/mcp.md, "Tool
 * schemas"). MCP wants a tool's `inputSchema` and `outputSchema` to describe
 * objects: a schema of `type: "object"` is the tool's as it is; any other is
 * wrapped as the one property of an object (`input`, `output`), its `$defs`
 * lifted to the wrapper so its references still resolve. A workflow without
 * `input_schema` takes any object; one without `output_schema` declares none.
 */

/** A tool schema, and whether it wraps the workflow's (so values are `{ input }` / `{ output }`). */
export interface ToolSchema {
  schema: JsonObject;
  wrapped: boolean;
}

/** The keywords that name a schema's definitions: they go to the wrapper's root. */
const DEFINITION_KEYWORDS = ["$defs", "definitions"] as const;

/** Whether a schema describes only objects (`type: "object"`), so it may be a tool's schema as it is. */
export function isObjectSchema(schema: JsonSchema | undefined): schema is JsonObject {
  return typeof schema === "object" && schema.type === "object";
}

/** The tool's `inputSchema`: the workflow's `input_schema` as it is, wrapped as `{ input }`, or any object. */
export function toToolInputSchema(inputSchema: JsonSchema | undefined): ToolSchema {
  if (inputSchema === undefined) {
    return { schema: { type: "object" }, wrapped: false };
  }
  return isObjectSchema(inputSchema) ? { schema: inputSchema, wrapped: false } : wrap(inputSchema, "input");
}

/** The tool's `outputSchema`, or none when the workflow declares no `output_schema`. */
export function toToolOutputSchema(outputSchema: JsonSchema | undefined): ToolSchema | undefined {
  if (outputSchema === undefined) {
    return undefined;
  }
  return isObjectSchema(outputSchema) ? { schema: outputSchema, wrapped: false } : wrap(outputSchema, "output");
}

function wrap(schema: JsonSchema, property: "input" | "output"): ToolSchema {
  if (typeof schema === "boolean") {
    return { schema: wrapper(property, schema, {}), wrapped: true };
  }
  // A schema with its own `$id` is a resource of its own: its references resolve inside it, so nothing moves.
  const lifted = "$id" in schema ? [] : DEFINITION_KEYWORDS.filter((keyword) => keyword in schema);
  const inner: JsonObject = {};
  const root: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if ((lifted as string[]).includes(key)) {
      root[key] = value;
    } else if (key !== "$schema") {
      inner[key] = value;
    }
  }
  return { schema: wrapper(property, inner, root), wrapped: true };
}

function wrapper(property: string, inner: Json, root: JsonObject): JsonObject {
  return { type: "object", properties: { [property]: inner }, required: [property], ...root };
}

/** The run's input from a tool call's arguments. */
export function toRunInput(args: JsonObject, input: ToolSchema): Json {
  return input.wrapped ? (args.input ?? null) : args;
}

/**
 * A run's output as a tool's `structuredContent` (an object, as MCP wants):
 * `{ output }` when the tool's output schema wraps the workflow's, or when
 * there is none and the output is not an object; else the output itself.
 */
export function toStructured(output: Json, outputSchema: ToolSchema | undefined): JsonObject {
  if (outputSchema?.wrapped === true || !isJsonObject(output)) {
    return { output };
  }
  return output;
}

export function isJsonObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What a property of an elicitation's form may say (MCP's primitive schemas), by its `type`. */
const PRIMITIVE_KEYWORDS: Record<string, readonly string[]> = {
  string: ["type", "title", "description", "default", "minLength", "maxLength", "format", "enum"],
  number: ["type", "title", "description", "default", "minimum", "maximum"],
  integer: ["type", "title", "description", "default", "minimum", "maximum"],
  boolean: ["type", "title", "description", "default"],
};
const STRING_FORMATS = new Set(["email", "uri", "date", "date-time"]);
/** What the form's root may say besides its properties. */
const ROOT_KEYWORDS = new Set(["type", "properties", "required", "additionalProperties", "title", "description"]);

/**
 * A gate's `input_schema` as an elicitation's `requestedSchema`, or null when
 * MCP's form cannot say all of it: the form is a flat object of primitive
 * properties (strings, numbers, integers, booleans, string enums), so a
 * schema with nesting, arrays, patterns, references or combinators is asked
 * otherwise (the needs-input report) rather than loosened.
 */
export function toElicitationSchema(gateSchema: JsonSchema): JsonObject | null {
  if (!isObjectSchema(gateSchema) || Object.keys(gateSchema).some((key) => !ROOT_KEYWORDS.has(key))) {
    return null;
  }
  const properties = gateSchema.properties ?? {};
  if (!isJsonObject(properties) || !Object.values(properties).every(isFormProperty)) {
    return null;
  }
  const required = gateSchema.required;
  const named = (name: Json): boolean => typeof name === "string" && Object.hasOwn(properties, name);
  if (required !== undefined && !(Array.isArray(required) && required.every(named))) {
    return null;
  }
  return { type: "object", properties, ...(required === undefined ? {} : { required }) };
}

function isFormProperty(property: Json): boolean {
  if (!isJsonObject(property) || typeof property.type !== "string") {
    return false;
  }
  const allowed = PRIMITIVE_KEYWORDS[property.type];
  if (allowed === undefined || Object.keys(property).some((key) => !allowed.includes(key))) {
    return false;
  }
  if (property.format !== undefined && !(typeof property.format === "string" && STRING_FORMATS.has(property.format))) {
    return false;
  }
  return property.enum === undefined || (Array.isArray(property.enum) && property.enum.every(isString));
}

function isString(value: Json): value is string {
  return typeof value === "string";
}
