/**
 * Which Worker secrets a definition may name as `$env:NAME`, and which values
 * are scrubbed from everything a task reports (docs/security.md).
 *
 * Any API token holder may register definitions, so a definition must never
 * reach the engine's own secrets: the journal signing key would let them
 * forge journals, the API tokens would let them act as anyone, the shell
 * server's token would open every run's workspace. `$env:NAME` therefore
 * resolves only names the deployment lists in `WORKFLOW_SECRETS`
 * (comma-separated) or, for plain configuration, `WORKFLOW_VARS`, and never a
 * name of {@link ENGINE_SECRET_NAMES}, even when listed. Registration refuses any other name (`definition.undeclared_secret`),
 * and the executor checks again at call time (`secret.not_declared`), since a
 * deployment may drop a name after a definition was registered.
 */

/** The variable that lists the secrets definitions may use as `$env:NAME`. */
export const WORKFLOW_SECRETS_VAR = "WORKFLOW_SECRETS";

/**
 * The variable that lists plain configuration definitions may use as
 * `$env:NAME` (a peer's base URL that differs per deployment): resolved like
 * a secret, but not scrubbed from what a task reports, so a URL built from it
 * stays readable in the journal.
 */
export const WORKFLOW_VARS_VAR = "WORKFLOW_VARS";

/**
 * The engine's own configuration: never resolvable by a definition, even if
 * `WORKFLOW_SECRETS` lists it.
 */
export const ENGINE_SECRET_NAMES: ReadonlySet<string> = new Set([
  "API_TOKENS",
  "JOURNAL_SIGNING_KEY",
  "JOURNAL_RETIRED_KEYS",
  "SHELL_SERVER_URL",
  "SHELL_SERVER_TOKEN",
  "CONTAINER_MODE",
  "SANDBOX_SLEEP_AFTER",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_HEADERS",
  WORKFLOW_SECRETS_VAR,
  WORKFLOW_VARS_VAR,
]);

/** The engine's own values that are secret (the rest of {@link ENGINE_SECRET_NAMES} is configuration). */
const ENGINE_SECRET_VALUES = ["API_TOKENS", "JOURNAL_SIGNING_KEY", "SHELL_SERVER_TOKEN"] as const;

/**
 * Secret values shorter than this are not scrubbed from results: replacing
 * every `abc` in every output would shred them. Declared secrets should be
 * long random strings; docs/security.md says so.
 */
export const MIN_SCRUBBED_SECRET_CHARS = 8;

/** The text that replaces a scrubbed secret value. */
export const REDACTED = "[redacted]";

/** `$env:NAME` anywhere in a string (credential headers may be `Bearer $env:NAME`). */
const SECRET_REFERENCE = /\$env:([A-Z_][A-Z0-9_]*)/g;

/** The names a string references as `$env:NAME`, in order. */
export function secretNamesIn(value: string): string[] {
  return [...value.matchAll(SECRET_REFERENCE)].map((match) => match[1] ?? "");
}

/** The secrets this deployment lets definitions use: `WORKFLOW_SECRETS` minus the engine's own. */
export function declaredSecretNames(env: object): ReadonlySet<string> {
  return listedNames(env, WORKFLOW_SECRETS_VAR);
}

/** Every name a definition may use as `$env:NAME`: the declared secrets and the declared vars (`WORKFLOW_VARS`). */
export function declaredEnvNames(env: object): ReadonlySet<string> {
  return new Set([...listedNames(env, WORKFLOW_SECRETS_VAR), ...listedNames(env, WORKFLOW_VARS_VAR)]);
}

function listedNames(env: object, variable: string): ReadonlySet<string> {
  const listed = (env as Record<string, unknown>)[variable];
  if (typeof listed !== "string") {
    return new Set();
  }
  const names = listed
    .split(/[\s,]+/)
    .map((name) => name.trim())
    .filter((name) => /^[A-Z_][A-Z0-9_]*$/.test(name) && !ENGINE_SECRET_NAMES.has(name));
  return new Set(names);
}

/** Why `name` may not be used by a definition, or `undefined` when it may. */
export function undeclaredSecretReason(name: string, declared: ReadonlySet<string>): string | undefined {
  if (ENGINE_SECRET_NAMES.has(name)) {
    return `$env:${name} is the engine's own configuration and is never available to definitions`;
  }
  if (!declared.has(name)) {
    return `$env:${name} is not a declared workflow secret or var: the deployment must list it in ${WORKFLOW_SECRETS_VAR} (a secret) or ${WORKFLOW_VARS_VAR} (plain configuration, such as a base URL) (docs/security.md)`;
  }
  return undefined;
}

/**
 * Every secret value a task's results are scrubbed of: the declared workflow
 * secrets and the engine's own (each API token, the signing key, the shell
 * server's token), long enough to scrub ({@link MIN_SCRUBBED_SECRET_CHARS}),
 * longest first so a secret that contains another is replaced whole.
 */
export function scrubbedSecretValues(env: object): readonly string[] {
  // An isolate's env does not change: its list is worked out once, not for every task.
  let values = scrubbedByEnv.get(env);
  if (values === undefined) {
    values = secretValuesOf(env);
    scrubbedByEnv.set(env, values);
  }
  return values;
}

const scrubbedByEnv = new WeakMap<object, string[]>();

function secretValuesOf(env: object): string[] {
  const record = env as Record<string, unknown>;
  const values: string[] = [];
  for (const name of [...declaredSecretNames(env), ...ENGINE_SECRET_VALUES]) {
    const value = record[name];
    if (typeof value !== "string") {
      continue;
    }
    // API_TOKENS holds several tokens: each is a secret of its own.
    values.push(...(name === "API_TOKENS" ? value.split(",").map((token) => token.trim()) : [value]));
  }
  const unique = new Set(values.filter((value) => value.length >= MIN_SCRUBBED_SECRET_CHARS));
  return [...unique].sort((a, b) => b.length - a.length);
}

/** Replaces every secret in `text` with {@link REDACTED}. */
export function redactText(text: string, secrets: readonly string[]): string {
  let redacted = text;
  for (const secret of secrets) {
    if (redacted.includes(secret)) {
      redacted = redacted.replaceAll(secret, REDACTED);
    }
  }
  return redacted;
}

/**
 * `value` with every secret replaced in every string and object key, however
 * deep. Returns `value` itself when it holds none (the common case costs one
 * serialisation), so callers can compare by identity.
 */
export function scrubSecrets<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0 || value === undefined) {
    return value;
  }
  const text = JSON.stringify(value);
  if (text === undefined || !secrets.some((secret) => text.includes(jsonEscaped(secret)))) {
    return value;
  }
  return scrubDeep(value, secrets) as T;
}

/** How `secret` appears inside a JSON string literal. */
function jsonEscaped(secret: string): string {
  return JSON.stringify(secret).slice(1, -1);
}

function scrubDeep(value: unknown, secrets: readonly string[]): unknown {
  if (typeof value === "string") {
    return redactText(value, secrets);
  }
  if (Array.isArray(value)) {
    return value.map((item) => scrubDeep(item, secrets));
  }
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // defineProperty: a scrubbed key of "__proto__" stays an own property.
      Object.defineProperty(out, redactText(key, secrets), {
        value: scrubDeep(item, secrets),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}
