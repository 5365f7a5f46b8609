/**
 * The deterministic "model" behind the local LLM peers: the OpenAI/Anthropic
 * compatible test server (scripts/lib/llm-server.mjs) and the fake Workers AI
 * binding of the tests (test/fakes/bindings.ts). Plain ESM, no dependencies,
 * no Node APIs: it runs in Node and in workerd alike.
 *
 * Answers:
 * - text: `Echo: <last user message>`;
 * - structured (a JSON Schema was asked for): a value built from the schema:
 *   objects get every property, strings are the last user message (or the
 *   first `enum`/`const`), integers and numbers its word count, booleans
 *   `true`, arrays one item, `anyOf`/`oneOf` their first branch.
 *
 * Markers steer the peer (they are removed before answering). The server reads
 * them from the text of every user message, in order, the first occurrence of
 * each winning (tool results are not read); the Workers AI fake from the last
 * user message. `[[key:K]]` counts requests under K; `[[fail:S]]` answers HTTP
 * status S (with `[[times:N]]`: only the first N requests for the key;
 * `[[retry-after:SEC]]` adds `Retry-After`); `[[invalid-json]]` answers text
 * that is not JSON where JSON was asked for; `[[wrong-shape]]` answers
 * `{"unexpected":true}`; `[[echo-credential]]` answers 401 with a body that
 * quotes the credential it received (as some providers do), to test redaction;
 * `[[echo-credential:answer]]` answers 200 with the credential in the answer's
 * text (which is then not JSON where JSON was asked for); `[[script:K]]` answers
 * from the turns posted to the server's `/scripts/K`;
 * `[[fail-model:<model_id>:<status>]]` answers HTTP status only to requests
 * for that model (several may be given, one per model);
 * `[[slow-model:<model_id>:<ms>]]` answers requests for that model only after
 * that many milliseconds (to test timeouts); `[[use-tools]]` makes the first
 * turn (a request with no assistant message yet) call every tool the request
 * offers, once each, and `[[use-tools:a,b]]` only those named, in that order
 * (a name the request does not offer is answered 400); each call's input is
 * built from the tool's schema as a structured answer is, and a tool the
 * request forces (how structured output is asked for) is not called. Later
 * turns answer as without the marker: an agent for examples, with no script.
 *
 * Tokens: input = the words of every message, output = the words of the answer.
 */

const MARKER = /\[\[([a-z-]+)(?::([^\]]*))?\]\]/g;

/**
 * @typedef {object} Directives
 * @property {string | undefined} key
 * @property {number | undefined} fail
 * @property {number | undefined} times
 * @property {number | undefined} retryAfter
 * @property {boolean} invalidJson
 * @property {boolean} wrongShape
 * @property {boolean} echoCredential
 * @property {boolean} echoCredentialInAnswer
 * @property {string | undefined} script
 * @property {Record<string, number>} failModels  model id → the status its requests get
 * @property {Record<string, number>} slowModels  model id → how long its requests wait for an answer (ms)
 * @property {string[] | undefined} useTools  the tools the first turn calls (`[]`: every one offered)
 */

/** @returns {Directives} */
export function noDirectives() {
  return {
    key: undefined,
    fail: undefined,
    times: undefined,
    retryAfter: undefined,
    invalidJson: false,
    wrongShape: false,
    echoCredential: false,
    echoCredentialInAnswer: false,
    script: undefined,
    failModels: {},
    slowModels: {},
    useTools: undefined,
  };
}

/**
 * The markers of a message, and its text without them. With `into`, the
 * markers are added to those already read (an earlier message's): the first
 * occurrence of each wins.
 * @param {string} text
 * @param {Directives} [into]
 * @returns {{ text: string, directives: Directives }}
 */
export function readDirectives(text, into = noDirectives()) {
  const directives = into;
  const clean = text.replace(MARKER, (_match, name, value) => {
    readMarker(directives, name, value);
    return "";
  });
  return { text: clean.replace(/\s+/g, " ").trim(), directives };
}

/**
 * The markers of several messages, read in order (the first occurrence of each wins).
 * @param {string[]} texts
 * @returns {Directives}
 */
export function directivesOf(texts) {
  const directives = noDirectives();
  for (const text of texts) readDirectives(text, directives);
  return directives;
}

/**
 * Sets one marker unless an earlier one set it.
 * @param {Directives} d
 * @param {string} name
 * @param {string | undefined} value
 */
function readMarker(d, name, value) {
  if (name === "key") d.key ??= value;
  else if (name === "fail") d.fail ??= Number(value);
  else if (name === "times") d.times ??= Number(value);
  else if (name === "retry-after") d.retryAfter ??= Number(value);
  else if (name === "invalid-json") d.invalidJson = true;
  else if (name === "wrong-shape") d.wrongShape = true;
  else if (name === "echo-credential" && value === "answer") d.echoCredentialInAnswer = true;
  else if (name === "echo-credential") d.echoCredential = true;
  else if (name === "script") d.script ??= value;
  else if (name === "fail-model") readPerModel(d.failModels, value);
  else if (name === "slow-model") readPerModel(d.slowModels, value);
  else if (name === "use-tools") d.useTools ??= toolNames(value);
}

/**
 * The names of `[[use-tools:a,b]]`, each once; none (every tool) without a value.
 * @param {string | undefined} value
 */
function toolNames(value) {
  const names = (value ?? "").split(",").map((name) => name.trim());
  return [...new Set(names.filter((name) => name.length > 0))];
}

/**
 * `<model_id>:<number>` into `table`, unless an earlier marker named the model.
 * @param {Record<string, number>} table
 * @param {string | undefined} value
 */
function readPerModel(table, value) {
  const colon = value?.lastIndexOf(":") ?? -1;
  const model = value?.slice(0, colon) ?? "";
  if (colon > 0 && !Object.hasOwn(table, model)) table[model] = Number(value?.slice(colon + 1));
}

/** @param {string} text */
export function countWords(text) {
  const words = text
    .trim()
    .split(/\s+/)
    .filter((word) => word.length > 0);
  return words.length;
}

/**
 * A value that satisfies `schema`, built from the question.
 * @param {unknown} schema
 * @param {string} question
 * @param {number} [depth]
 * @returns {unknown}
 */
export function valueFromSchema(schema, question, depth = 0) {
  if (schema === null || typeof schema !== "object" || depth > 8) return question;
  const s = /** @type {Record<string, any>} */ (schema);
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) return valueFromSchema(s.anyOf[0], question, depth + 1);
  if (Array.isArray(s.oneOf) && s.oneOf.length > 0) return valueFromSchema(s.oneOf[0], question, depth + 1);
  const type = Array.isArray(s.type) ? (s.type.find((/** @type {string} */ t) => t !== "null") ?? s.type[0]) : s.type;
  switch (type) {
    case "object":
    case undefined: {
      if (type === undefined && !s.properties) return question;
      /** @type {Record<string, unknown>} */
      const out = {};
      for (const [name, sub] of Object.entries(s.properties ?? {}))
        out[name] = valueFromSchema(sub, question, depth + 1);
      return out;
    }
    case "string":
      return question;
    case "integer":
    case "number":
      return countWords(question);
    case "boolean":
      return true;
    case "null":
      return null;
    case "array":
      return [valueFromSchema(s.items ?? {}, question, depth + 1)];
    default:
      return question;
  }
}

/**
 * The answer to one request: text, or JSON text built from `schema`.
 * @param {{ question: string, schema?: unknown, directives: Directives }} request
 * @returns {string}
 */
export function answerText({ question, schema, directives }) {
  if (schema === undefined) return `Echo: ${question}`;
  if (directives.echoCredentialInAnswer) return `Not JSON, but here is what you sent: ${question}`;
  if (directives.invalidJson) return "Sure! Here is the JSON you asked for: {";
  if (directives.wrongShape) return JSON.stringify({ unexpected: true });
  return JSON.stringify(valueFromSchema(schema, question));
}
