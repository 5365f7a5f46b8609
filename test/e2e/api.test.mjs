// The HTTP contract's edges against wrangler dev: health, auth, validation, 404s, idempotency.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { api, assertError, detailPath, env, register, show, startRun, uid } from "./helpers.mjs";

/** A one-node workflow whose input must be `{ name: string }`. */
function echoWorkflow(/** @type {string} */ id) {
  return {
    id,
    input_schema: {
      type: "object",
      required: ["name"],
      properties: { name: { type: "string", minLength: 1 } },
      additionalProperties: false,
    },
    nodes: {
      echo: {
        task: {
          id: `${id}-task`,
          steps: [
            {
              ref: "copy",
              action: {
                id: `${id}-copy`,
                kind: "context",
                implementation: { updates: [{ path: "name", expr: "input.name" }] },
              },
              input_mapping: { name: "$.input.name" },
              output_mapping: { "output.name": "$.name" },
            },
          ],
        },
        input_mapping: { name: "$.input.name" },
        output_mapping: { "output.name": "$.name" },
      },
    },
  };
}

describe("health and auth", () => {
  test("GET /healthz is 200 { ok: true } without auth", async () => {
    const { url } = await env();
    const res = await fetch(`${url}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true });
  });

  test("/v1 without a token is 401 with { error: { code, message } }", async () => {
    assertError(assert, await api("GET", `/v1/runs/${uid("run")}`, { token: null }), 401);
    assertError(assert, await api("POST", "/v1/definitions", { token: null, body: { workflows: [] } }), 401);
    assertError(
      assert,
      await api("POST", `/v1/workflows/${uid("wf")}/runs`, { token: null, body: { input: {} } }),
      401,
    );
    // (GET /v1/journal-keys is left out: a JWKS of public keys may be served without auth.)
  });

  test("/v1 with a wrong or malformed token is 401 (or 403)", async () => {
    assertError(assert, await api("GET", `/v1/runs/${uid("run")}`, { token: "not-a-valid-token" }), [401, 403]);
    assertError(
      assert,
      await api("GET", `/v1/runs/${uid("run")}`, { token: null, headers: { authorization: "Basic dXNlcjpwYXNz" } }),
      [401, 403],
    );
  });
});

describe("validation and lookups", () => {
  test("a bad definition is 400 with details listing each problem's path", async () => {
    const res = await api("POST", "/v1/definitions", {
      body: {
        workflows: [
          {
            id: "Not A Valid Id!",
            nodes: { a: { task: { id: uid("t"), steps: [] }, depends_on: ["does_not_exist"] } },
          },
        ],
      },
    });
    assertError(assert, res, 400);
    const details = res.json.error.details;
    assert.ok(Array.isArray(details) && details.length > 0, `details should list the problems: ${show(res)}`);
    for (const d of details) {
      assert.ok("path" in d, `every detail has a path: ${JSON.stringify(d)}`);
    }
    const paths = details.map(detailPath);
    assert.ok(
      paths.some((p) => /^workflows\.0\.id$/.test(p) || (p.includes("workflows") && p.endsWith("id"))),
      `a detail should point at workflows.0.id, got ${JSON.stringify(paths)}`,
    );
  });

  test("a cyclic workflow is rejected with 400", async () => {
    const id = uid("cycle");
    const task = {
      id: `${id}-task`,
      steps: [
        {
          ref: "s",
          action: { id: `${id}-a`, kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } },
        },
      ],
    };
    const res = await api("POST", "/v1/definitions", {
      body: { workflows: [{ id, nodes: { a: { task, depends_on: ["b"] }, b: { task, depends_on: ["a"] } } }] },
    });
    assertError(assert, res, 400);
  });

  test("a body that is not JSON is 400, not 500", async () => {
    assertError(assert, await api("POST", "/v1/definitions", { rawBody: "{ not json" }), 400);
  });

  test("an unknown workflow is 404", async () => {
    const missing = uid("missing");
    assertError(assert, await startRun(missing, { input: {} }), 404);
    assertError(assert, await api("GET", `/v1/workflows/${missing}`), 404);
  });

  test("an unknown run is 404", async () => {
    assertError(assert, await api("GET", `/v1/runs/${uid("run")}`), 404);
  });

  test("input that does not match input_schema is 400 with details", async () => {
    const id = uid("echo");
    await register({ workflows: [echoWorkflow(id)] });
    const res = await startRun(id, { input: { name: 42 } });
    assertError(assert, res, 400);
    const details = res.json.error.details;
    assert.ok(Array.isArray(details) && details.length > 0, `details should list the problems: ${show(res)}`);
    assert.ok(
      details.map(detailPath).some((p) => p.includes("name")),
      `a detail should point at the name field: ${JSON.stringify(details)}`,
    );
  });

  test("the same idempotency_key returns the same run (201, then 200)", async () => {
    const id = uid("idem");
    await register({ workflows: [echoWorkflow(id)] });
    const key = uid("key");
    const first = await startRun(id, { input: { name: "Ada" }, idempotency_key: key });
    assert.equal(first.status, 201, show(first));
    assert.equal(typeof first.json.run_id, "string");
    assert.deepEqual(first.json.workflow, { id, version: 1 });
    const second = await startRun(id, { input: { name: "Ada" }, idempotency_key: key });
    assert.equal(second.status, 200, show(second));
    assert.equal(second.json.run_id, first.json.run_id);
    const other = await startRun(id, { input: { name: "Ada" }, idempotency_key: uid("key") });
    assert.equal(other.status, 201, show(other));
    assert.notEqual(other.json.run_id, first.json.run_id);
  });

  test("registering identical content again returns the existing version", async () => {
    const id = uid("same");
    const first = await register({ workflows: [echoWorkflow(id)] });
    const again = await register({ workflows: [echoWorkflow(id)] });
    const version = (/** @type {any} */ r) => r?.created?.find((/** @type {any} */ c) => c.id === id)?.version;
    assert.equal(version(first), 1, JSON.stringify(first));
    assert.equal(version(again), 1, JSON.stringify(again));
  });
});
