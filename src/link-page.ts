import { EngineError } from "../lib/errors.ts";
import type { GateAnswerBody, GateView } from "../schemas/api.ts";
import type { Json, JsonObject } from "../schemas/common.ts";

/**
 * The page of an approval link (src/gate-links.ts): plain HTML, no script, a
 * stylesheet of this origin (`/link.css`), and a form built from the gate's
 * `input_schema` that posts back to the link. An approval gate asks approve
 * or reject and a reason; an input gate asks one field per property of an
 * object schema (text, number, checkbox, a choice for an `enum`, JSON for
 * anything else), or the whole answer as JSON.
 */

/** The form as posted (`application/x-www-form-urlencoded`). */
export type FormFields = Pick<URLSearchParams, "get">;

/** A field of the form: a property of the gate's object schema. */
interface Field {
  name: string;
  kind: "text" | "number" | "integer" | "boolean" | "choice" | "json";
  required: boolean;
  choices: string[];
  description: string | null;
}

/** The fields of an input gate's schema, or null when it is not an object schema with properties. */
function fieldsOf(schema: GateView["input_schema"]): Field[] | null {
  if (typeof schema !== "object" || !isObject(schema.properties)) {
    return null;
  }
  const required = Array.isArray(schema.required) ? schema.required : [];
  return Object.entries(schema.properties).map(([name, property]) => {
    const spec = isObject(property) ? property : {};
    const choices = Array.isArray(spec.enum) && spec.enum.every((value) => typeof value === "string") ? spec.enum : [];
    return {
      name,
      kind: choices.length > 0 ? "choice" : kindOf(spec.type),
      required: required.includes(name),
      choices: choices as string[],
      description: typeof spec.description === "string" ? spec.description : null,
    };
  });
}

function kindOf(type: Json | undefined): Field["kind"] {
  return type === "string" || type === "number" || type === "integer" || type === "boolean"
    ? type === "string"
      ? "text"
      : type
    : "json";
}

/** The link's page: the gate's prompt, who the link is for, and the form. */
export function renderLinkPage(gate: GateView, approver: string): string {
  const form =
    gate.kind === "approval"
      ? approvalForm()
      : (fieldsOf(gate.input_schema)?.map(fieldHtml).join("\n") ?? jsonField("json", "Answer (JSON)", true));
  return page(
    gate.kind === "approval" ? "Approval requested" : "Input requested",
    `<p class="who">For <strong>${escape(approver)}</strong> · gate ${escape(gate.gate_id)} · step ${escape(gate.step)}</p>
<pre class="prompt">${escape(gate.prompt)}</pre>
<form method="post">
${form}
<p><label>Note (optional, kept with the answer)<br><input type="text" name="note" maxlength="256"></label></p>
<p><button type="submit">Send answer</button></p>
</form>
<p class="fine">Nothing is decided until you send the form. The link answers once.</p>`,
  );
}

/** Approve or reject as a choice with no default, then one button: Enter in a text field decides nothing by itself. */
function approvalForm(): string {
  return `<fieldset class="decide"><legend>Decision</legend>
<label><input type="radio" name="decision" value="approve" required> Approve</label>
<label><input type="radio" name="decision" value="reject"> Reject</label>
</fieldset>
<p><label>Reason (optional)<br><textarea name="reason" rows="3" maxlength="2000"></textarea></label></p>`;
}

function fieldHtml(field: Field): string {
  const id = `f.${field.name}`;
  const label = `${escape(field.name)}${field.required ? "" : " (optional)"}${
    field.description === null ? "" : ` · ${escape(field.description)}`
  }`;
  const required = field.required ? " required" : "";
  const inputs: Record<Field["kind"], () => string> = {
    text: () => `<input type="text" name="${escape(id)}"${required}>`,
    number: () => `<input type="number" step="any" name="${escape(id)}"${required}>`,
    integer: () => `<input type="number" step="1" name="${escape(id)}"${required}>`,
    boolean: () => `<input type="checkbox" name="${escape(id)}" value="true">`,
    choice: () =>
      `<select name="${escape(id)}"${required}>${field.required ? "" : `<option value=""></option>`}${field.choices
        .map((choice) => `<option>${escape(choice)}</option>`)
        .join("")}</select>`,
    json: () => `<textarea name="${escape(id)}" rows="4"${required}></textarea>`,
  };
  if (field.kind === "json") {
    return jsonField(id, `${label} (JSON)`, field.required);
  }
  return `<p><label>${label}<br>${inputs[field.kind]()}</label></p>`;
}

function jsonField(name: string, label: string, required: boolean): string {
  return `<p><label>${escape(label)}<br><textarea name="${escape(name)}" rows="6"${required ? " required" : ""}></textarea></label></p>`;
}

/**
 * The answer the form's fields make, for the gate to check against its
 * schema: `{ approved, reason? }` for an approval, the object of its fields
 * (empty optional fields left out) or the JSON answer for an input gate.
 */
export function formToResponse(gate: GateView, form: FormFields): GateAnswerBody {
  const note = text(form, "note");
  const responder = note ? { responder: note.slice(0, 256) } : {};
  if (gate.kind === "approval") {
    const decision = text(form, "decision");
    if (decision !== "approve" && decision !== "reject") {
      throw EngineError.terminal("gate.invalid_response", "choose Approve or Reject");
    }
    const reason = text(form, "reason");
    return { response: { approved: decision === "approve", ...(reason ? { reason } : {}) }, ...responder };
  }
  const fields = fieldsOf(gate.input_schema);
  if (fields === null) {
    return { response: parseJsonField(text(form, "json") ?? "", "the answer"), ...responder };
  }
  const response: JsonObject = {};
  for (const field of fields) {
    const value = fieldValue(field, form);
    if (value !== undefined) {
      response[field.name] = value;
    }
  }
  return { response, ...responder };
}

function fieldValue(field: Field, form: FormFields): Json | undefined {
  const raw = text(form, `f.${field.name}`);
  if (field.kind === "boolean") {
    return raw === "true";
  }
  if (raw === null || raw === "") {
    return undefined;
  }
  if (field.kind === "number" || field.kind === "integer") {
    const value = Number(raw);
    if (!Number.isFinite(value)) {
      throw EngineError.terminal("gate.invalid_response", `${field.name} must be a number`);
    }
    return value;
  }
  return field.kind === "json" ? parseJsonField(raw, field.name) : raw;
}

function parseJsonField(raw: string, what: string): Json {
  try {
    return JSON.parse(raw) as Json;
  } catch {
    throw EngineError.terminal("gate.invalid_response", `${what} is not JSON`);
  }
}

function text(form: FormFields, name: string): string | null {
  const value = form.get(name);
  return typeof value === "string" ? value.trim() : null;
}

/** The page after the answer: what was recorded, and as whom. */
export function renderAnswered(gate: GateView): string {
  const by = gate.answered_by && "link" in gate.answered_by ? gate.answered_by.approver : "you";
  return page(
    "Answer recorded",
    `<p>Gate ${escape(gate.gate_id)} of step ${escape(gate.step)} was answered by ${escape(by)} through this link.</p>
<pre class="prompt">${escape(JSON.stringify(gate.response ?? null, null, 2))}</pre>
<p class="fine">The link is used up; the run's journal records the answer.</p>`,
  );
}

/** A link that cannot answer (unknown, used, expired, or its gate closed), or an answer the gate refused. */
export function renderProblem(status: number, error: EngineError): string {
  const details = (error.details ?? []).map((detail) => `<li>${escape(`${detail.path}: ${detail.message}`)}</li>`);
  return page(
    status === 410 ? "This link has expired" : status === 409 ? "This link cannot answer now" : "Not answered",
    `<p>${escape(error.message)}</p>${details.length > 0 ? `<ul>${details.join("")}</ul>` : ""}
<p class="fine">${escape(error.code)} (${status})</p>`,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${escape(title)} · Trellis</title>
<link rel="stylesheet" href="/link.css">
</head>
<body>
<main>
<h1>${escape(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

function escape(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
