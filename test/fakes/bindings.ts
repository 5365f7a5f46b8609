/**
 * Test doubles for the bindings that only exist on Cloudflare's network
 * (Workers AI, Vectorize) and for Analytics Engine, whose local simulation
 * records nothing a test could read. Each implements the binding's own
 * interface — the methods of `Ai`, `Vectorize` and `AnalyticsEngineDataset`
 * that the engine calls, with the same argument and result shapes — so the
 * action handlers run unchanged against them.
 *
 * They are bound only in tests: test/worker.ts wraps the real `Executor` so
 * that its `env` carries them (see docs/architecture.md, "Local peers and test doubles for the AI actions").
 * State lives in the single instances below, shared by the Worker and the test
 * files (they run in one isolate), which is what lets a test look at what a
 * run wrote. Tests keep to their own ids, metadata and metric names.
 */
import { answerText, countWords, readDirectives } from "../../scripts/lib/llm-answers.mjs";

/** Dimensions of the fake embeddings. */
export const FAKE_EMBEDDING_DIMENSIONS = 64;

/**
 * Workers AI `run` for the two input shapes the engine sends: embeddings
 * (`{ text: string[] }` → `{ shape, data, pooling }`, a normalised bag of
 * hashed words, so texts that share words are close) and chat (`{ messages,
 * response_format? }` → `{ response, usage }`, the answers of the local LLM
 * peer, scripts/lib/llm-answers.mjs). It never touches the network.
 */
export class FakeAi {
  readonly calls: Array<{ model: string; inputs: unknown }> = [];

  async run(model: string, inputs: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<unknown> {
    options?.signal?.throwIfAborted();
    this.calls.push({ model, inputs });
    if (Array.isArray(inputs.text) || typeof inputs.text === "string") {
      const texts = Array.isArray(inputs.text) ? inputs.text.map(String) : [inputs.text];
      return { shape: [texts.length, FAKE_EMBEDDING_DIMENSIONS], data: texts.map(fakeEmbedding), pooling: "mean" };
    }
    if (Array.isArray(inputs.messages)) {
      return chat(inputs.messages as Array<{ role?: unknown; content?: unknown }>, inputs.response_format);
    }
    throw new Error(
      `FakeAi: model ${model} got inputs it does not understand: ${JSON.stringify(inputs).slice(0, 200)}`,
    );
  }
}

/** A deterministic unit vector for a text: each word adds 1 to a hashed dimension. */
export function fakeEmbedding(text: string): number[] {
  const vector: number[] = Array.from({ length: FAKE_EMBEDDING_DIMENSIONS }, () => 0);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    let hash = 2166136261;
    for (let i = 0; i < word.length; i++) {
      hash = Math.imul(hash ^ word.charCodeAt(i), 16777619) >>> 0;
    }
    const slot = hash % FAKE_EMBEDDING_DIMENSIONS;
    vector[slot] = (vector[slot] ?? 0) + 1;
  }
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((value) => value / norm);
}

function chat(messages: Array<{ role?: unknown; content?: unknown }>, format: unknown): unknown {
  const texts = messages.map((message) => ({
    role: String(message.role ?? ""),
    text: typeof message.content === "string" ? message.content : "",
  }));
  const lastUser = [...texts].reverse().find((message) => message.role === "user")?.text ?? "";
  const { text: question, directives } = readDirectives(lastUser);
  const schema =
    isRecord(format) && format.type === "json_schema"
      ? isRecord(format.json_schema) && isRecord(format.json_schema.schema)
        ? format.json_schema.schema
        : format.json_schema
      : undefined;
  const answer = answerText({ question, schema, directives });
  const inputTokens = texts.reduce((total, message) => total + countWords(readDirectives(message.text).text), 0);
  const outputTokens = countWords(answer);
  // Workers AI returns JSON-mode answers already parsed.
  const response = schema === undefined ? answer : parseOr(answer);
  return {
    response,
    usage: { prompt_tokens: inputTokens, completion_tokens: outputTokens, total_tokens: inputTokens + outputTokens },
  };
}

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

type StoredVector = {
  id: string;
  values: number[];
  namespace?: string;
  metadata?: Record<string, VectorizeVectorMetadata>;
};

/**
 * An in-memory Vectorize index (the V2 `Vectorize` interface) with cosine
 * similarity, metadata filters (`$eq $ne $lt $lte $gt $gte $in $nin` and
 * implicit equality), namespaces, `topK` (default 5, as Vectorize) and
 * `returnMetadata` / `returnValues`. Mutations apply at once.
 */
export class MemoryVectorize {
  private readonly vectors = new Map<string, StoredVector>();
  private mutations = 0;

  async describe(): Promise<VectorizeIndexInfo> {
    const first = this.vectors.values().next();
    return {
      vectorCount: this.vectors.size,
      dimensions: first.done === true ? 0 : first.value.values.length,
      processedUpToDatetime: Date.now(),
      processedUpToMutation: this.mutations,
    };
  }

  async query(vector: VectorFloatArray | number[], options: VectorizeQueryOptions = {}): Promise<VectorizeMatches> {
    const query = [...vector];
    const level =
      options.returnMetadata === true
        ? "all"
        : options.returnMetadata === false || options.returnMetadata === undefined
          ? "none"
          : options.returnMetadata;
    const matches = [...this.vectors.values()]
      .filter(
        (stored) =>
          (options.namespace === undefined || stored.namespace === options.namespace) &&
          matchesFilter(stored.metadata ?? {}, options.filter),
      )
      .map((stored) => ({ stored, score: cosine(query, stored.values) }))
      .sort((a, b) => b.score - a.score || (a.stored.id < b.stored.id ? -1 : 1))
      .slice(0, options.topK ?? 5)
      .map(({ stored, score }) => ({
        id: stored.id,
        score,
        ...(stored.namespace === undefined ? {} : { namespace: stored.namespace }),
        ...(level === "none" || stored.metadata === undefined ? {} : { metadata: stored.metadata }),
        ...(options.returnValues === true ? { values: stored.values } : {}),
      }));
    return { matches, count: matches.length };
  }

  async queryById(vectorId: string, options?: VectorizeQueryOptions): Promise<VectorizeMatches> {
    const stored = this.vectors.get(vectorId);
    return stored === undefined ? { matches: [], count: 0 } : this.query(stored.values, options);
  }

  async insert(vectors: VectorizeVector[]): Promise<VectorizeAsyncMutation> {
    for (const vector of vectors) {
      if (this.vectors.has(vector.id)) {
        throw new Error(`VECTOR_INSERT_ERROR: vector ${vector.id} already exists`);
      }
    }
    return this.upsert(vectors);
  }

  async upsert(vectors: VectorizeVector[]): Promise<VectorizeAsyncMutation> {
    for (const vector of vectors) {
      this.vectors.set(vector.id, {
        id: vector.id,
        values: [...vector.values],
        namespace: vector.namespace,
        metadata: vector.metadata,
      });
    }
    return { mutationId: this.nextMutation() };
  }

  async deleteByIds(ids: string[]): Promise<VectorizeAsyncMutation> {
    for (const id of ids) {
      this.vectors.delete(id);
    }
    return { mutationId: this.nextMutation() };
  }

  async getByIds(ids: string[]): Promise<VectorizeVector[]> {
    return ids.flatMap((id) => {
      const stored = this.vectors.get(id);
      return stored === undefined ? [] : [{ ...stored }];
    });
  }

  private nextMutation(): string {
    this.mutations += 1;
    return `mutation-${this.mutations}`;
  }
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    normA += x * x;
    normB += y * y;
  }
  return normA === 0 || normB === 0 ? 0 : dot / Math.sqrt(normA * normB);
}

function matchesFilter(
  metadata: Record<string, VectorizeVectorMetadata>,
  filter: VectorizeVectorMetadataFilter | undefined,
): boolean {
  return Object.entries(filter ?? {}).every(([field, condition]) => {
    const value = metadata[field];
    if (condition === null || typeof condition !== "object" || Array.isArray(condition)) {
      return value === condition;
    }
    return Object.entries(condition).every(([op, operand]) => compare(op, value, operand));
  });
}

function compare(op: string, value: unknown, operand: unknown): boolean {
  switch (op) {
    case "$eq":
      return value === operand;
    case "$ne":
      return value !== operand;
    case "$in":
      return Array.isArray(operand) && operand.includes(value);
    case "$nin":
      return Array.isArray(operand) && !operand.includes(value);
    case "$lt":
    case "$lte":
    case "$gt":
    case "$gte": {
      if (!(
        (typeof value === "number" && typeof operand === "number") ||
        (typeof value === "string" && typeof operand === "string")
      )) {
        return false;
      }
      return op === "$lt"
        ? value < operand
        : op === "$lte"
          ? value <= operand
          : op === "$gt"
            ? value > operand
            : value >= operand;
    }
    default:
      throw new Error(`MemoryVectorize: unsupported filter operator ${op}`);
  }
}

/** An Analytics Engine dataset that keeps what is written, for tests to read. */
export class RecordingAnalytics {
  readonly points: AnalyticsEngineDataPoint[] = [];

  writeDataPoint(event?: AnalyticsEngineDataPoint): void {
    this.points.push(structuredClone(event ?? {}));
  }
}

/** The one instance of each double, bound into every test Executor's env. */
export const FAKE_BINDINGS = {
  AI: new FakeAi(),
  VECTORIZE: new MemoryVectorize(),
  METRICS: new RecordingAnalytics(),
};
