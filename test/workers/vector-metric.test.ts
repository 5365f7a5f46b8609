import { describe, it } from "vitest";
import { FAKE_BINDINGS, fakeEmbedding } from "../fakes/bindings.ts";
import { api, uniqueId, runWorkflow, journal, stepsOf } from "./helpers.ts";

/** Documents tagged with a batch of their own, so each test filters to what it wrote. */
function docs(batch: string) {
  return [
    {
      id: `${batch}-tides`,
      title: "Tides",
      body: "the moon pulls the ocean into tides",
      metadata: { batch, topic: "sea" },
    },
    {
      id: `${batch}-bread`,
      title: "Bread",
      body: "flour water salt and yeast make bread",
      metadata: { batch, topic: "kitchen" },
    },
    {
      id: `${batch}-waves`,
      title: "Waves",
      body: "wind over the ocean raises waves",
      metadata: { batch, topic: "sea" },
    },
  ];
}

const upsertAction = {
  kind: "vector",
  implementation: { index: "default", operation: "upsert", text_template: "{{title}}: {{body}}" },
};

/** A node running an inline task, whose output lands at `output.<as>` of the run. */
function task(steps: unknown[], as = "result") {
  return { task: { steps }, output_mapping: { [`output.${as}`]: "$" } };
}

describe("the vector action", () => {
  it("upserts documents, embedding their rendered text, then finds the closest to a question", async ({ expect }) => {
    const batch = uniqueId("batch");
    const before = FAKE_BINDINGS.AI.calls.length;
    const result = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          index: task(
            [
              {
                ref: "upsert",
                action: upsertAction,
                input_mapping: { vectors: "$.input.docs" },
                output_mapping: { "output.upserted": "$" },
              },
            ],
            "index",
          ),
          search: {
            depends_on: ["index"],
            ...task(
              [
                {
                  ref: "query",
                  action: {
                    kind: "vector",
                    implementation: { index: "default", query_template: "{{question}}", top_k: 2, filter: { batch } },
                  },
                  input_mapping: { question: "$.input.question" },
                  output_mapping: { "output.results": "$.results" },
                },
              ],
              "search",
            ),
            input_mapping: { question: "$.input.question" },
          },
        },
      },
      { docs: docs(batch), question: "why does the ocean have tides" },
    );
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.output.index.upserted).toMatchObject({
      ids: [`${batch}-tides`, `${batch}-bread`, `${batch}-waves`],
      count: 3,
    });
    const results = result.output.search.results as Array<{ id: string; score: number; metadata: unknown }>;
    expect(results.map((r) => r.id)).toEqual([`${batch}-tides`, `${batch}-waves`]);
    expect(results[0]?.metadata).toEqual({ batch, topic: "sea" });
    expect(results[0]?.score).toBeGreaterThan(results[1]?.score ?? 1);
    // One embedding call for the three documents, one for the question, with the default model.
    const calls = FAKE_BINDINGS.AI.calls.slice(before);
    expect(calls.map((call) => call.model)).toEqual(["@cf/baai/bge-base-en-v1.5", "@cf/baai/bge-base-en-v1.5"]);
    expect(calls[0]?.inputs).toEqual({
      text: [
        "Tides: the moon pulls the ocean into tides",
        "Bread: flour water salt and yeast make bread",
        "Waves: wind over the ocean raises waves",
      ],
    });
  });

  it("queries with a vector taken from the input, with metadata filters, and upserts given values", async ({
    expect,
  }) => {
    const batch = uniqueId("vals");
    const vectors = docs(batch).map((doc) => ({ id: doc.id, values: fakeEmbedding(doc.body), metadata: doc.metadata }));
    const before = FAKE_BINDINGS.AI.calls.length;
    const result = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          main: task([
            { ref: "upsert", action: upsertAction, input_mapping: { vectors: "$.input.vectors" } },
            {
              ref: "query",
              action: {
                kind: "vector",
                implementation: {
                  index: "default",
                  vector: "$.embedding",
                  top_k: 5,
                  filter: { batch, topic: { $ne: "sea" } },
                },
              },
              input_mapping: { embedding: "$.input.probe" },
              output_mapping: { "output.results": "$.results" },
            },
          ]),
        },
      },
      { vectors, probe: fakeEmbedding("the ocean") },
    );
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.output.result.results.map((r: { id: string }) => r.id)).toEqual([`${batch}-bread`]);
    expect(FAKE_BINDINGS.AI.calls.length).toBe(before);
  });

  it("fails with vector.no_binding for an index the Worker has no binding for", async ({ expect }) => {
    const result = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          main: task([
            { ref: "q", action: { kind: "vector", implementation: { index: "docs", query_template: "x" } } },
          ]),
        },
      },
      {},
    );
    expect(result.status).toBe("failed");
    expect(result.error.code).toBe("vector.no_binding");
    expect(result.error.message).toContain("VECTORIZE_DOCS");
  });

  it("rejects at registration a query with neither query_template nor vector, and a bad index name", async ({
    expect,
  }) => {
    const noQuery = await api("POST", "/v1/definitions", {
      actions: [{ id: uniqueId("noquery"), kind: "vector", implementation: { index: "default" } }],
    });
    expect(noQuery.status).toBe(400);
    expect(noQuery.json.error.details).toEqual([
      expect.objectContaining({ path: "actions.0.implementation", code: "definition.invalid_vector" }),
    ]);
    const badIndex = await api("POST", "/v1/definitions", {
      actions: [{ id: uniqueId("badindex"), kind: "vector", implementation: { index: "Docs!", query_template: "x" } }],
    });
    expect(badIndex.status).toBe(400);
    expect(badIndex.json.error.details.map((detail: { path: string }) => detail.path)).toEqual([
      "actions.0.implementation.index",
    ]);
  });
});

describe("the metric action", () => {
  it("writes a data point whose value is CEL over the input, with dimensions, at the end of a search workflow", async ({
    expect,
  }) => {
    const batch = uniqueId("metric");
    const name = uniqueId("search_hits");
    const result = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          main: task([
            { ref: "upsert", action: upsertAction, input_mapping: { vectors: "$.input.docs" } },
            {
              ref: "query",
              action: {
                kind: "vector",
                implementation: { index: "default", query_template: "{{q}}", top_k: 3, filter: { batch } },
              },
              input_mapping: { q: "$.input.q" },
            },
            {
              ref: "count",
              action: {
                kind: "metric",
                implementation: {
                  metric_name: name,
                  value: { expr: "size(input.results)" },
                  dimensions: {
                    top: "$.input.results[0].id",
                    source: "search",
                    sea: { expr: "input.results[0].metadata.topic == 'sea'" },
                  },
                },
              },
              input_mapping: { results: "$.state.query.results" },
              output_mapping: { "output.metric": "$" },
            },
          ]),
        },
      },
      { docs: docs(batch), q: "ocean waves and wind" },
    );
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.output.result.metric).toEqual({
      metric_name: name,
      value: 3,
      dimensions: { top: `${batch}-waves`, source: "search", sea: "true" },
    });
    const points = FAKE_BINDINGS.METRICS.points.filter((point) => point.indexes?.[0] === name);
    expect(points).toEqual([
      { indexes: [name], doubles: [3], blobs: [name, result.run_id, "true", "search", `${batch}-waves`] },
    ]);
    // The step records name the index or dataset and count what each call did.
    const completed = (await journal(result.run_id)).find((entry) => entry.kind === "task.completed");
    const calls = stepsOf(completed).map((step) => step.attempts[0]?.call);
    expect(calls).toEqual([
      { index: "default", operation: "upsert", count: docs(batch).length },
      { index: "default", operation: "query", count: 3 },
      { dataset: "METRICS", metric_name: name, data_points: 1, dimensions: 3 },
    ]);
  });

  it("writes a literal value, and fails with metric.invalid_value when the CEL value is not a number", async ({
    expect,
  }) => {
    const name = uniqueId("literal");
    const ok = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          main: task([{ ref: "m", action: { kind: "metric", implementation: { metric_name: name, value: 1.5 } } }]),
        },
      },
      {},
    );
    expect(ok.status, JSON.stringify(ok.error)).toBe("completed");
    expect(FAKE_BINDINGS.METRICS.points.filter((point) => point.indexes?.[0] === name)).toEqual([
      { indexes: [name], doubles: [1.5], blobs: [name, ok.run_id] },
    ]);

    const bad = await runWorkflow(
      {
        id: uniqueId("wf"),
        nodes: {
          main: task([
            {
              ref: "m",
              action: { kind: "metric", implementation: { metric_name: uniqueId("bad"), value: { expr: "'many'" } } },
            },
          ]),
        },
      },
      {},
    );
    expect(bad.status).toBe("failed");
    expect(bad.error.code).toBe("metric.invalid_value");
  });
});
