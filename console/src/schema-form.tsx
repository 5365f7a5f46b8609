/**
 * A form generated from a JSON Schema (schema-fields.ts): gates are answered
 * with it, and runs started. Each field has a visible label, so it can be
 * found by its name.
 */
import type { ComponentChildren } from "preact";
import { useMemo, useState } from "preact/hooks";
import { fieldsOf, valueOf, type Field, type RawValues } from "./schema-fields.ts";

export interface SchemaFormProps {
  schema: unknown;
  submitLabel: string;
  /** Sends the value; a rejection is shown under the form. */
  onSubmit: (value: unknown) => Promise<void>;
  /** Extra fields before the button (e.g. the responder). */
  children?: ComponentChildren;
  idPrefix: string;
}

export function SchemaForm(props: SchemaFormProps) {
  const fields = useMemo(() => fieldsOf(props.schema), [props.schema]);
  const [raw, setRaw] = useState<RawValues>({});
  const [problems, setProblems] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent): Promise<void> => {
    event.preventDefault();
    const value = valueOf(fields, raw);
    if (!value.ok) {
      setProblems(value.errors.map((e) => `${e.field}: ${e.message}`));
      return;
    }
    setProblems([]);
    setBusy(true);
    try {
      await props.onSubmit(value.value);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="schema-form" onSubmit={submit}>
      {fields.map((field) => (
        <FieldInput
          key={field.name}
          field={field}
          id={`${props.idPrefix}-${field.name || "value"}`}
          value={raw[field.name]}
          onChange={(value) => setRaw({ ...raw, [field.name]: value })}
        />
      ))}
      {props.children}
      {problems.length > 0 ? <p class="error">{problems.join("; ")}</p> : null}
      <button type="submit" disabled={busy}>
        {props.submitLabel}
      </button>
    </form>
  );
}

function FieldInput(props: {
  field: Field;
  id: string;
  value: string | boolean | undefined;
  onChange: (value: string | boolean) => void;
}) {
  const { field, id } = props;
  const label = (
    <label for={id}>
      {field.label}
      {field.required && field.kind !== "boolean" ? " *" : ""}
    </label>
  );
  const hint = field.description === undefined ? null : <small class="muted">{field.description}</small>;
  if (field.kind === "boolean") {
    return (
      <div class="field field-check">
        <input
          id={id}
          type="checkbox"
          checked={props.value === true}
          onChange={(e) => props.onChange(e.currentTarget.checked)}
        />
        {label}
        {hint}
      </div>
    );
  }
  const text = typeof props.value === "string" ? props.value : "";
  const onInput = (e: { currentTarget: { value: string } }): void => props.onChange(e.currentTarget.value);
  return (
    <div class="field">
      {label}
      {field.kind === "choice" ? (
        <select id={id} value={text} onChange={onInput}>
          <option value="">–</option>
          {field.choices.map((choice) => (
            <option value={choice}>{choice}</option>
          ))}
        </select>
      ) : field.kind === "json" ? (
        <textarea id={id} rows={4} value={text} onInput={onInput} placeholder="JSON" />
      ) : field.kind === "text" ? (
        <input id={id} type="text" value={text} onInput={onInput} />
      ) : (
        <input id={id} type="number" step={field.kind === "number" ? "any" : "1"} value={text} onInput={onInput} />
      )}
      {hint}
    </div>
  );
}
