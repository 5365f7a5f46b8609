import { EngineError, ensureEngineError } from "../../lib/errors.ts";
import { selectJsonPath } from "../../lib/expr/jsonpath.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import type { ActionImplementation } from "../../schemas/actions.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import { isRemoteOnlyBindingError } from "./remote-only.ts";
import type { ActionHandler } from "./types.ts";

/** The Workers AI embedding model used when an action names none (768 dimensions). */
export const DEFAULT_EMBEDDING_MODEL = "@cf/baai/bge-base-en-v1.5";

/** Results a query returns when the action sets no `top_k`. */
export const DEFAULT_TOP_K = 5;

/** The most vectors one upsert takes (Vectorize accepts up to 1000 per call from a Worker). */
export const MAX_UPSERT_VECTORS = 1_000;

type VectorImplementation = ActionImplementation<"vector">;

/** What this action uses of the Workers AI binding: text embeddings. */
export interface Embedder {
  run(model: string, inputs: { text: string[] }, options?: { signal?: AbortSignal }): Promise<unknown>;
}

/** What this action uses of a Vectorize binding. */
export type VectorIndex = Pick<Vectorize, "query" | "upsert">;

/**
 * `vector`: similarity search over, and writes to, a Vectorize index.
 *
 * - `query` (default): embeds the rendered `query_template` with Workers AI
 *   (`embedding_model`), or takes the vector the `vector` JSONPath selects in
 *   the input, and returns `{ results: [{ id, score, metadata }] }`.
 * - `upsert`: writes `input.vectors` (`[{ id, values? | text?, metadata?,
 *   namespace? }]`); items without `values` are embedded (their `text`, or
 *   `text_template` rendered over the item). Returns `{ ids, count, mutation_id }`.
 *
 * The index `docs` is the binding `VECTORIZE_DOCS`; `default` is `VECTORIZE`.
 * Binding failures are retryable (`vector.failed`); bad input is not.
 */
export const vectorAction: ActionHandler<"vector"> = {
  async run(action, input, context) {
    const implementation = action.implementation;
    const index = indexBinding(implementation.index, context.env);
    const operation = implementation.operation ?? "query";
    const output =
      operation === "upsert"
        ? await upsert(implementation, index, input, context.env, context.signal)
        : await query(implementation, index, input, context.env, context.signal);
    context.note?.({ index: implementation.index, operation, count: countOf(output) });
    return output;
  },
};

/** How many vectors an operation wrote (upsert) or found (query). */
function countOf(output: Json): number {
  if (output === null || typeof output !== "object" || Array.isArray(output)) {
    return 0;
  }
  if (typeof output.count === "number") {
    return output.count;
  }
  return Array.isArray(output.results) ? output.results.length : 0;
}

/** The binding that serves an index name: `VECTORIZE_<NAME>` (upper case, `-` → `_`), or `VECTORIZE` for `default`. */
export function indexBindingName(index: string): string {
  return index === "default" ? "VECTORIZE" : `VECTORIZE_${index.toUpperCase().replaceAll("-", "_")}`;
}

function indexBinding(index: string, env: Env): VectorIndex {
  const name = indexBindingName(index);
  const binding: unknown = Reflect.get(env, name);
  if (!isVectorIndex(binding)) {
    throw EngineError.terminal(
      "vector.no_binding",
      `the index "${index}" needs the Vectorize binding ${name}, which this Worker does not have (Vectorize is remote-only: absent under wrangler dev --local)`,
    );
  }
  return binding;
}

function isVectorIndex(value: unknown): value is VectorIndex {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof Reflect.get(value, "query") === "function" &&
    typeof Reflect.get(value, "upsert") === "function"
  );
}

async function query(
  implementation: VectorImplementation,
  index: VectorIndex,
  input: Json,
  env: Env,
  signal: AbortSignal,
): Promise<Json> {
  const vector =
    implementation.vector === undefined
      ? await embedOne(implementation, renderTemplate(implementation.query_template ?? "", input), env, signal)
      : vectorFromInput(implementation.vector, input);
  const matches = await callBinding("query", () =>
    index.query(vector, {
      topK: implementation.top_k ?? DEFAULT_TOP_K,
      returnMetadata: implementation.return_metadata ?? "all",
      ...(implementation.filter === undefined
        ? {}
        : { filter: implementation.filter as VectorizeVectorMetadataFilter }),
      ...(implementation.namespace === undefined ? {} : { namespace: implementation.namespace }),
    }),
  );
  return {
    results: matches.matches.map((match) => ({
      id: match.id,
      score: match.score,
      metadata: match.metadata ?? null,
    })),
  };
}

async function upsert(
  implementation: VectorImplementation,
  index: VectorIndex,
  input: Json,
  env: Env,
  signal: AbortSignal,
): Promise<Json> {
  const items = upsertItems(input);
  const toEmbed = items.filter((item) => item.values === undefined);
  const texts = toEmbed.map((item) =>
    implementation.text_template === undefined
      ? (item.text ?? "")
      : renderTemplate(implementation.text_template, item.source),
  );
  const embedded = texts.length === 0 ? [] : await embed(implementation, texts, env, signal);
  let next = 0;
  const vectors: VectorizeVector[] = items.map((item) => {
    const values = item.values ?? embedded[next++];
    if (values === undefined) {
      throw EngineError.terminal("vector.embedding_failed", `no embedding came back for vector ${item.id}`);
    }
    const namespace = item.namespace ?? implementation.namespace;
    return {
      id: item.id,
      values,
      ...(item.metadata === undefined ? {} : { metadata: item.metadata as Record<string, VectorizeVectorMetadata> }),
      ...(namespace === undefined ? {} : { namespace }),
    };
  });
  const mutation = await callBinding("upsert", () => index.upsert(vectors));
  return { ids: vectors.map((vector) => vector.id), count: vectors.length, mutation_id: mutation.mutationId };
}

interface UpsertItem {
  id: string;
  values?: number[];
  text?: string;
  metadata?: JsonObject;
  namespace?: string;
  source: Json;
}

function upsertItems(input: Json): UpsertItem[] {
  const list = input !== null && typeof input === "object" && !Array.isArray(input) ? input.vectors : undefined;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_UPSERT_VECTORS) {
    throw EngineError.terminal(
      "vector.invalid_input",
      `an upsert takes "vectors": an array of 1 to ${MAX_UPSERT_VECTORS} items { id, values? | text?, metadata?, namespace? }`,
    );
  }
  return list.map((item, i) => {
    if (
      item === null ||
      typeof item !== "object" ||
      Array.isArray(item) ||
      typeof item.id !== "string" ||
      item.id.length === 0
    ) {
      throw EngineError.terminal("vector.invalid_input", `vectors.${i} needs a non-empty string "id"`);
    }
    const values = item.values === undefined ? undefined : toNumbers(item.values, `vectors.${i}.values`);
    const text = typeof item.text === "string" ? item.text : undefined;
    const metadata =
      item.metadata !== null && typeof item.metadata === "object" && !Array.isArray(item.metadata)
        ? item.metadata
        : undefined;
    return {
      id: item.id,
      values,
      text,
      metadata,
      namespace: typeof item.namespace === "string" ? item.namespace : undefined,
      source: item,
    };
  });
}

function vectorFromInput(path: string, input: Json): number[] {
  const selected = selectJsonPath(path, input);
  if (!selected.found) {
    throw EngineError.terminal("vector.invalid_input", `the input has no query vector at ${path}`);
  }
  return toNumbers(selected.value, path);
}

function toNumbers(value: unknown, where: string): number[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((n) => typeof n === "number" && Number.isFinite(n))) {
    throw EngineError.terminal("vector.invalid_input", `${where} must be a non-empty array of numbers`);
  }
  return value as number[];
}

async function embedOne(
  implementation: VectorImplementation,
  text: string,
  env: Env,
  signal: AbortSignal,
): Promise<number[]> {
  const [vector] = await embed(implementation, [text], env, signal);
  if (vector === undefined) {
    throw EngineError.terminal("vector.embedding_failed", "the embedding model returned no vector");
  }
  return vector;
}

/** One Workers AI call for all texts; the answer is `{ shape, data: number[][] }`. */
async function embed(
  implementation: VectorImplementation,
  texts: string[],
  env: Env,
  signal: AbortSignal,
): Promise<number[][]> {
  const ai: Embedder | undefined = env.AI;
  if (ai === undefined) {
    throw EngineError.terminal(
      "vector.no_binding",
      "embedding needs the Workers AI binding AI, which this Worker does not have (it is remote-only: absent under wrangler dev --local)",
    );
  }
  const model = implementation.embedding_model ?? DEFAULT_EMBEDDING_MODEL;
  const output = await callBinding("embed", () => ai.run(model, { text: texts }, { signal }));
  const data = output !== null && typeof output === "object" ? Reflect.get(output, "data") : undefined;
  if (!Array.isArray(data) || data.length !== texts.length) {
    throw EngineError.terminal(
      "vector.embedding_failed",
      `embedding model ${model} did not return ${texts.length} vector(s)`,
    );
  }
  return data.map((vector, i) => toNumbers(vector, `the embedding of text ${i}`));
}

/** Binding calls fail for infrastructure reasons (capacity, network): retryable. */
async function callBinding<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (thrown) {
    if (thrown instanceof EngineError) {
      throw thrown;
    }
    if (isRemoteOnlyBindingError(thrown)) {
      throw EngineError.terminal(
        "vector.no_binding",
        `Vectorize/Workers AI ${what}: ${ensureEngineError(thrown).message} (remote-only bindings are not available under wrangler dev --local)`,
      );
    }
    throw EngineError.retryable(
      "vector.failed",
      `Vectorize/Workers AI ${what} failed: ${ensureEngineError(thrown).message}`,
    );
  }
}
