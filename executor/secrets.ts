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

/** What a rendered string's secrets resolved to, so error messages can be scrubbed of them. */
export interface ResolvedSecret {
  value: string;
  /** The resolved secret values inside `value`. */
  secrets: string[];
}

/** {@link resolveSecrets}, also returning the secret values it put in, for {@link redactSecrets}. */
export function resolveSecretsTracked(value: string, env: Env): ResolvedSecret {
  const secrets: string[] = [];
  const resolved = value.replace(SECRET_REFERENCE, (match) => {
    const secret = resolveSecrets(match, env);
    secrets.push(secret);
    return secret;
  });
  return { value: resolved, secrets };
}

/**
 * Replaces every resolved secret in `text` with `[redacted]`. Peers sometimes
 * echo credentials in their error bodies (a rejected key, a header dump); a
 * message built from such a body passes through here before it can reach a
 * step error, and so the journal.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let redacted = text;
  // Longest first, so a secret that contains another is replaced whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret.length > 0) {
      redacted = redacted.replaceAll(secret, "[redacted]");
    }
  }
  return redacted;
}
