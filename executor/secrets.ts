import { EngineError } from "../lib/errors.ts";
import { declaredEnvNames, declaredSecretNames, redactText, undeclaredSecretReason } from "../lib/secrets.ts";

const SECRET_REFERENCE = /\$env:([A-Z_][A-Z0-9_]*)/g;

/**
 * Replaces each `$env:NAME` in `value` with the Worker secret `NAME`, at call
 * time, when the deployment declares `NAME` as a workflow secret
 * (`WORKFLOW_SECRETS`, lib/secrets.ts). The engine's own secrets never
 * resolve. The resolved value is only ever handed to the outbound call; the
 * executor scrubs it from everything the task reports (docs/security.md).
 * @throws EngineError `secret.not_declared` for a name the deployment does not
 *   declare, `secret.missing` for a declared name that has no value.
 */
export function resolveSecrets(value: string, env: Env): string {
  const declared = declaredEnvNames(env);
  return value.replace(SECRET_REFERENCE, (_match, name: string) => {
    const reason = undeclaredSecretReason(name, declared);
    if (reason !== undefined) {
      throw EngineError.terminal("secret.not_declared", reason);
    }
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
  const declaredSecrets = declaredSecretNames(env);
  const resolved = value.replace(SECRET_REFERENCE, (match, name: string) => {
    const secret = resolveSecrets(match, env);
    // A var (WORKFLOW_VARS) is configuration, not a secret: it stays readable in what is reported.
    if (declaredSecrets.has(name)) {
      secrets.push(secret);
    }
    return secret;
  });
  return { value: resolved, secrets };
}

/**
 * Replaces every resolved secret in `text` with `[redacted]`, whatever its
 * length. Peers sometimes echo credentials in their error bodies (a rejected
 * key, a header dump); a message built from such a body passes through here
 * at once. The executor also scrubs every declared secret from the whole task
 * result (lib/secrets.ts `scrubSecrets`), so this is the first of two nets.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  // Longest first, so a secret that contains another is replaced whole.
  return redactText(
    text,
    [...secrets].filter((secret) => secret.length > 0).sort((a, b) => b.length - a.length),
  );
}
