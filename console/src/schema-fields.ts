/**
 * A form from a JSON Schema (a gate's or a workflow's `input_schema`): one
 * field per property of an object schema, typed by the property's `type`,
 * and the JSON value the filled-in form stands for. The server checks the
 * value against the schema again; the form only shapes it.
 */

export type FieldKind = "text" | "number" | "integer" | "boolean" | "choice" | "json";

export interface Field {
  /** The property name; `""` for a schema that is not an object of properties (the whole value, as JSON). */
  name: string;
  label: string;
  kind: FieldKind;
  required: boolean;
  description: string | undefined;
  /** The allowed values of a `choice` field, as JSON text. */
  choices: string[];
}

/** What the user typed or ticked, by field name. */
export type RawValues = Record<string, string | boolean>;

export type FormValue = { ok: true; value: unknown } | { ok: false; errors: { field: string; message: string }[] };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The form's fields: one per property of an object schema, else one JSON field for the whole value. */
export function fieldsOf(schema: unknown): Field[] {
  const properties = isRecord(schema) ? schema["properties"] : undefined;
  const type = isRecord(schema) ? schema["type"] : undefined;
  if (!isRecord(properties) || (type !== undefined && type !== "object")) {
    // A schema that accepts anything (`{}`, `true`, none) may be left empty: the value is then `{}`.
    const anything = schema === undefined || schema === true || (isRecord(schema) && Object.keys(schema).length === 0);
    return [
      { name: "", label: "Value (JSON)", kind: "json", required: !anything, description: undefined, choices: [] },
    ];
  }
  const required = new Set(
    isRecord(schema) && Array.isArray(schema["required"])
      ? schema["required"].filter((name): name is string => typeof name === "string")
      : [],
  );
  return Object.entries(properties).map(([name, property]) => fieldOf(name, property, required.has(name)));
}

function fieldOf(name: string, property: unknown, required: boolean): Field {
  const spec = isRecord(property) ? property : {};
  const title = typeof spec["title"] === "string" ? spec["title"] : name;
  const description = typeof spec["description"] === "string" ? spec["description"] : undefined;
  const base = { name, label: title, required, description, choices: [] as string[] };
  if (Array.isArray(spec["enum"])) {
    return { ...base, kind: "choice", choices: spec["enum"].map((choice) => JSON.stringify(choice)) };
  }
  switch (spec["type"]) {
    case "string":
      return { ...base, kind: "text" };
    case "number":
      return { ...base, kind: "number" };
    case "integer":
      return { ...base, kind: "integer" };
    case "boolean":
      return { ...base, kind: "boolean" };
    default:
      return { ...base, kind: "json" };
  }
}

/**
 * The value the form stands for: an object of the filled-in fields (an empty
 * optional field is left out; a box is `true` or `false`), or the parsed
 * JSON of the single whole-value field. Numbers and JSON that do not parse
 * are reported per field.
 */
export function valueOf(fields: readonly Field[], raw: RawValues): FormValue {
  const errors: { field: string; message: string }[] = [];
  const whole = fields.length === 1 && fields[0]?.name === "";
  const value: Record<string, unknown> = {};
  for (const field of fields) {
    const entered = raw[field.name];
    const parsed = parseField(field, entered);
    if (parsed === undefined) {
      if (field.required && field.kind !== "boolean") {
        errors.push({ field: field.label, message: "required" });
      }
      continue;
    }
    if ("error" in parsed) {
      errors.push({ field: field.label, message: parsed.error });
      continue;
    }
    if (whole) {
      return errors.length > 0 ? { ok: false, errors } : { ok: true, value: parsed.value };
    }
    value[field.name] = parsed.value;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value };
}

function parseField(
  field: Field,
  entered: string | boolean | undefined,
): { value: unknown } | { error: string } | undefined {
  if (field.kind === "boolean") {
    return { value: entered === true };
  }
  const text = typeof entered === "string" ? entered.trim() : "";
  if (text === "") {
    return undefined;
  }
  switch (field.kind) {
    case "text":
      return { value: typeof entered === "string" ? entered : "" };
    case "number":
    case "integer": {
      const number = Number(text);
      if (!Number.isFinite(number) || (field.kind === "integer" && !Number.isInteger(number))) {
        return { error: `not ${field.kind === "integer" ? "a whole number" : "a number"}` };
      }
      return { value: number };
    }
    case "choice":
    case "json":
      try {
        return { value: JSON.parse(text) as unknown };
      } catch {
        return { error: "not valid JSON" };
      }
  }
}
