import { EngineError } from "../lib/errors.ts";

const SECRET_REFERENCE = /\$env:([A-Z_][A-Z0-9_]*)/g;

/**
 * Replaces each `$env:NAME` in `value` with the Worker secret `NAME`, at call
 * time. The resolved value is only ever handed to the outbound call: it never
 * enters a context, an output, an error message or the journal.
 */
export function resolveSecrets(value: string, env: Env): string {
  return value.replace(SECRET_REFERENCE, (_match, name: string) => {
    const secret = (env as unknown as Record<string, unknown>)[name];
    if (typeof secret !== "string" || secret === "") {
      throw EngineError.terminal("secret.missing", `the secret ${name} is not set in the Worker's environment`);
    }
    return secret;
  });
}
