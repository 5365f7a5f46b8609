import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { verifyJournal } from "../../lib/journal/index.ts";
import { principalOf } from "../../src/auth.ts";
import {
  registerWorkflow,
  api,
  uniqueId,
  waitForRun,
  httpTarget,
  start,
  journal,
  httpStep,
  detailsOf,
  verified,
} from "./helpers.ts";

const contextTask = (expr: string, path = "v") => ({
  steps: [
    {
      ref: "s",
      action: { kind: "context", implementation: { updates: [{ path, expr }] } },
      output_mapping: { [`output.${path}`]: `$.${path}` },
    },
  ],
});
const slowTask = (ms: number, key: string) => ({
  steps: [
    httpStep("wait", `${httpTarget()}/slow/${key}?ms=${ms}`, { output_mapping: { "output.waited": "$.body.waited" } }),
  ],
});

describe("scheduling", () => {
  it("runs the two middle nodes of a diamond at the same time", async ({ expect }) => {
    const id = uniqueId("diamond");
    const key = uniqueId("k");
    await registerWorkflow({
      id,
      nodes: {
        a: { task: contextTask("1") },
        b: { task: slowTask(300, `${key}-b`), depends_on: ["a"] },
        c: { task: slowTask(300, `${key}-c`), depends_on: ["a"] },
        d: {
          task: contextTask("input.b + input.c", "sum"),
          depends_on: ["b", "c"],
          input_mapping: { b: "$.state.b.waited", c: "$.state.c.waited" },
        },
      },
    });
    const run = await waitForRun(await start(id));
    expect(run.status).toBe("completed");
    expect(run.nodes.d.status).toBe("completed");
    const entries: any[] = await journal(run.run_id);
    const interval = (node: string) => {
      const dispatched = entries.find((entry) => entry.kind === "task.dispatched" && entry.body.node === node);
      const completed = entries.find((entry) => entry.kind === "task.completed" && entry.body.node === node);
      return [Date.parse(dispatched.at), Date.parse(completed.at)] as const;
    };
    const [bStart, bEnd] = interval("b");
    const [cStart, cEnd] = interval("c");
    // Their executions overlap: each started before the other finished.
    expect(bStart).toBeLessThan(cEnd);
    expect(cStart).toBeLessThan(bEnd);
    const dDispatched = entries.find((entry) => entry.kind === "task.dispatched" && entry.body.node === "d");
    expect(Date.parse(dDispatched.at)).toBeGreaterThanOrEqual(Math.max(bEnd, cEnd));
  });

  it("skips a node whose when is false, skips dependents of only skipped nodes, and runs a node with one live dependency", async ({
    expect,
  }) => {
    const id = uniqueId("when");
    await registerWorkflow({
      id,
      nodes: {
        gate: { task: contextTask("input.go", "go") },
        never: { task: contextTask("1"), depends_on: ["gate"], when: "state.gate.go == true" },
        after_never: { task: contextTask("2"), depends_on: ["never"] },
        joined: { task: contextTask("3"), depends_on: ["never", "gate"] },
      },
    });
    const run = await waitForRun(await start(id, { input: { go: false } }));
    expect(run.status).toBe("completed");
    expect(run.nodes.never.status).toBe("skipped");
    expect(run.nodes.after_never.status).toBe("skipped");
    expect(run.nodes.joined.status).toBe("completed");
    const skipped = (await journal(run.run_id))
      .filter((entry) => entry.kind === "node.skipped")
      .map((entry) => entry.body.node);
    expect(skipped).toEqual(["never", "after_never"]);
  });

  it("lists a run's nodes in dependency order, by id within a layer, not by id alone", async ({ expect }) => {
    const id = uniqueId("order");
    // By id alone the order would be analyse, fetch, publish, zip.
    await registerWorkflow({
      id,
      nodes: {
        publish: { task: contextTask("2"), depends_on: ["analyse"] },
        zip: { task: contextTask("1"), depends_on: ["fetch"] },
        analyse: { task: contextTask("1"), depends_on: ["fetch"] },
        fetch: { task: contextTask("0") },
      },
    });
    const run = await waitForRun(await start(id));
    expect(run.status).toBe("completed");
    expect(Object.keys(run.nodes)).toEqual(["fetch", "analyse", "zip", "publish"]);
  });

  it("sends tasks in executor calls of at most 6, at most 20 calls in one event", async ({ expect }) => {
    const id = uniqueId("wide");
    // http tasks: pure ones would run in the coordinator, with no executor call.
    const task = { steps: [httpStep("call", `${httpTarget()}/echo`)] };
    const nodes = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`n${i}`, { task }]));
    await registerWorkflow({ id, max_parallel: 100, nodes });
    const run = await waitForRun(await start(id));
    expect(run.status).toBe("completed");
    const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName(run.run_id)) as unknown as {
      getStats(): Promise<{ maxDispatchesPerEvent: number; maxTasksPerCall: number; dispatches: number }>;
    };
    const stats = await stub.getStats();
    expect(stats.dispatches).toBe(40);
    // 40 tasks ready at once: one event, 7 calls of at most 6.
    expect(stats.maxTasksPerCall).toBe(6);
    expect(stats.maxDispatchesPerEvent).toBe(7);
  });

  it("keeps the definition snapshot taken at start when a new version is registered during the run", async ({
    expect,
  }) => {
    const id = uniqueId("snap");
    const key = uniqueId("k");
    await registerWorkflow({
      id,
      nodes: {
        slow: { task: slowTask(300, key) },
        last: { task: contextTask("'v1'", "tag"), depends_on: ["slow"], output_mapping: { "output.tag": "$.tag" } },
      },
    });
    const start = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    await registerWorkflow({
      id,
      nodes: {
        slow: { task: slowTask(300, key) },
        last: { task: contextTask("'v2'", "tag"), depends_on: ["slow"], output_mapping: { "output.tag": "$.tag" } },
      },
    });
    const run = await waitForRun(start.json.run_id);
    expect(run.workflow).toEqual({ id, version: 1 });
    expect(run.output).toEqual({ tag: "v1" });
  });
});

describe("starting runs", () => {
  it("rejects input that breaks input_schema with 400 details and creates no run", async ({ expect }) => {
    const id = uniqueId("typed");
    await registerWorkflow({
      id,
      input_schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
      nodes: { a: { task: contextTask("1") } },
    });
    const response = await api("POST", `/v1/workflows/${id}/runs`, { input: { name: 42 }, idempotency_key: "k1" });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("run.invalid_input");
    expect(response.json.error.details[0].path).toBe("input.name");
    // The key is still free: the rejected request created nothing.
    const fixed = await api("POST", `/v1/workflows/${id}/runs`, { input: { name: "Ada" }, idempotency_key: "k1" });
    expect(fixed.status).toBe(201);
  });

  it("answers 404 for an unknown workflow or version and for an unknown run", async ({ expect }) => {
    const unknown = await api("POST", `/v1/workflows/${uniqueId("ghost")}/runs`, { input: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe("workflow.not_found");
    const id = uniqueId("v");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    expect((await api("POST", `/v1/workflows/${id}/runs`, { version: 5 })).status).toBe(404);
    for (const runId of ["run_00000000000000000000000000000000", "not-a-run"]) {
      const response = await api("GET", `/v1/runs/${runId}`);
      expect(response.status).toBe(404);
      expect(response.json.error.code).toBe("run.not_found");
    }
  });

  it("rejects a malformed run request with the path of each problem", async ({ expect }) => {
    const id = uniqueId("v");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    const response = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, version: "two", mode: "turbo" });
    expect(response.status).toBe(400);
    expect(response.json.error.details.map((detail: { path: string }) => detail.path).sort()).toEqual([
      "mode",
      "version",
    ]);
  });

  it("returns the same run for the same idempotency_key, and 409 for that key with other input", async ({ expect }) => {
    const id = uniqueId("idem");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("input.n", "n") } } });
    const first = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 1 }, idempotency_key: "order-7" });
    const second = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 1 }, idempotency_key: "order-7" });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.json.run_id).toBe(first.json.run_id);
    const conflict = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 2 }, idempotency_key: "order-7" });
    expect(conflict.status).toBe(409);
    expect(conflict.json.error.code).toBe("run.idempotency_conflict");
    const other = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 1 }, idempotency_key: "order-8" });
    expect(other.json.run_id).not.toBe(first.json.run_id);
  });
});

/** How long the delayed starts below wait: long enough to read them queued, short enough for a test. */
const DELAY_MS = 1_500;
const DAY_MS = 24 * 60 * 60_000;

/** The `at` of a run's `run.status` entry into `to`. */
async function movedAt(runId: string, to: string): Promise<number> {
  const entry = (await journal(runId)).find((candidate) => candidate.kind === "run.status" && candidate.body.to === to);
  return Date.parse(String(entry?.at));
}

describe("delayed starts", () => {
  it("a start with delay_ms is created queued, shows its start_at, and runs to completion once it is due", async ({
    expect,
  }) => {
    const id = uniqueId("delay");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("input.n", "n") } } });
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 7 }, delay_ms: DELAY_MS });
    expect(started.status).toBe(201);
    expect(started.json.status).toBe("queued");
    const queued = (await api("GET", `/v1/runs/${started.json.run_id}`)).json;
    expect(queued.status).toBe("queued");
    expect(queued.nodes.a.status).toBe("pending");
    const startAt = Date.parse(queued.start_at);
    expect(startAt - Date.parse(queued.created_at)).toBe(DELAY_MS);
    expect(queued.controls).toEqual(["cancel", "pause"]);

    const run = await waitForRun(started.json.run_id);
    expect(run.status).toBe("completed");
    expect(run.nodes.a.status).toBe("completed");
    expect(await movedAt(run.run_id, "running")).toBeGreaterThanOrEqual(startAt);
    const created = (await journal(run.run_id))[0];
    expect(created?.kind).toBe("run.created");
    expect(created?.body.start_at).toBe(queued.start_at);
    expect(await verified(run.run_id)).toBe(true);
  });

  it("a start with start_at (an ISO-8601 time with any offset) starts then; one already past starts at once", async ({
    expect,
  }) => {
    const id = uniqueId("start-at");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    const due = Date.now() + DELAY_MS;
    // The same instant written one hour east of UTC.
    const startAt = new Date(due + 3_600_000).toISOString().replace("Z", "+01:00");
    const later = await api("POST", `/v1/workflows/${id}/runs`, { start_at: startAt });
    expect(later.status).toBe(201);
    expect(later.json.status).toBe("queued");
    expect((await api("GET", `/v1/runs/${later.json.run_id}`)).json.start_at).toBe(new Date(due).toISOString());

    const past = await api("POST", `/v1/workflows/${id}/runs`, {
      start_at: new Date(Date.now() - DAY_MS).toISOString(),
    });
    expect(past.json.status).not.toBe("queued");
    expect((await waitForRun(past.json.run_id)).status).toBe("completed");

    expect((await waitForRun(later.json.run_id)).status).toBe("completed");
    expect(await movedAt(later.json.run_id, "running")).toBeGreaterThanOrEqual(due);
  });

  it("refuses both fields, a start more than 365 days ahead and a malformed time with 400 and the path of the problem", async ({
    expect,
  }) => {
    const id = uniqueId("delay-bad");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    const soon = new Date(Date.now() + 60_000).toISOString();
    const cases: [Record<string, unknown>, string][] = [
      [{ start_at: soon, delay_ms: 1_000 }, "delay_ms"],
      [{ delay_ms: 366 * DAY_MS }, "delay_ms"],
      [{ delay_ms: -1 }, "delay_ms"],
      [{ delay_ms: 1.5 }, "delay_ms"],
      [{ start_at: new Date(Date.now() + 366 * DAY_MS).toISOString() }, "start_at"],
      [{ start_at: "tomorrow" }, "start_at"],
      [{ start_at: "2030-01-01T09:00:00" }, "start_at"], // no offset
      [{ start_at: "2030-02-30T09:00:00Z" }, "start_at"],
      [{ start_at: 1_900_000_000_000 }, "start_at"],
    ];
    for (const [body, path] of cases) {
      const response = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: "k", ...body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.json.error.code).toBe("run.invalid_request");
      expect(detailsOf(response.json).map((detail) => detail.path)).toEqual([path]);
    }
    expect((await api("POST", `/v1/workflows/${id}/runs`, { delay_ms: 365 * DAY_MS })).json.status).toBe("queued");
    // The refused requests created nothing: the key is free.
    expect((await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: "k" })).status).toBe(201);
  });

  it("a retried start with the same idempotency_key and delay_ms finds its run; another delay is a conflict", async ({
    expect,
  }) => {
    const id = uniqueId("delay-idem");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    const body = { input: {}, idempotency_key: "order-9", delay_ms: DELAY_MS };
    const first = await api("POST", `/v1/workflows/${id}/runs`, body);
    const second = await api("POST", `/v1/workflows/${id}/runs`, body);
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(second.json).toMatchObject({ run_id: first.json.run_id, status: "queued" });
    const other = await api("POST", `/v1/workflows/${id}/runs`, { ...body, delay_ms: DELAY_MS + 1 });
    expect(other.status).toBe(409);
    expect(other.json.error.code).toBe("run.idempotency_conflict");
    const undelayed = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: "order-9" });
    expect(undelayed.status).toBe(409);
    expect((await waitForRun(first.json.run_id)).status).toBe("completed");
  });
});

describe("cancel", () => {
  it("cancels a run queued for a delayed start: it never starts", async ({ expect }) => {
    const id = uniqueId("cancel-queued");
    await registerWorkflow({ id, nodes: { a: { task: contextTask("1") } } });
    const start = await api("POST", `/v1/workflows/${id}/runs`, { delay_ms: DELAY_MS });
    const cancelled = await api("POST", `/v1/runs/${start.json.run_id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.json.status).toBe("cancelled");
    await new Promise((resolve) => setTimeout(resolve, DELAY_MS + 500));
    const run = (await api("GET", `/v1/runs/${start.json.run_id}`)).json;
    expect(run.status).toBe("cancelled");
    expect(run.nodes.a.status).toBe("cancelled");
    const kinds = (await journal(run.run_id)).map((entry) => entry.kind);
    expect(kinds).not.toContain("task.dispatched");
    expect(kinds.at(-1)).toBe("attest");
  });

  it("cancels a running run, ignores the late result, and refuses a second cancel with 409", async ({ expect }) => {
    const id = uniqueId("cancel");
    await registerWorkflow({
      id,
      nodes: { slow: { task: slowTask(500, uniqueId("k")) }, after: { task: contextTask("1"), depends_on: ["slow"] } },
    });
    const start = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    await waitForRun(start.json.run_id, (run) => run.nodes.slow.status === "running");
    const cancelled = await api("POST", `/v1/runs/${start.json.run_id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.json.status).toBe("cancelled");
    await new Promise((resolve) => setTimeout(resolve, 700));
    const run = await waitForRun(start.json.run_id);
    expect(run.status).toBe("cancelled");
    expect(run.nodes.slow.status).toBe("cancelled");
    expect(run.nodes.after.status).toBe("cancelled");
    expect(
      (await journal(run.run_id)).some((entry) => entry.kind === "task.dispatched" && entry.body.node === "after"),
    ).toBe(false);
    const entries: any[] = await journal(run.run_id);
    expect(entries.at(-1).kind).toBe("attest");
    expect(entries.at(-1).body.outcome).toBe("cancelled");
    const again = await api("POST", `/v1/runs/${start.json.run_id}/cancel`, {});
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("run.terminal");
  });
});

describe("the journal", () => {
  it("verifies with the published key, ends in an attestation, and names the entry whose byte was changed", async ({
    expect,
  }) => {
    const id = uniqueId("journal");
    await registerWorkflow({
      id,
      nodes: {
        a: { task: contextTask("'x'", "v"), output_mapping: { "output.v": "$.v" } },
        b: { task: contextTask("2"), depends_on: ["a"] },
      },
    });
    const run = await waitForRun(await start(id));
    const entries: any[] = await journal(run.run_id);
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect(jwks.keys[0]).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA" });
    const report = await verifyJournal(entries, jwks, { requireAttestation: true });
    expect(report).toMatchObject({ ok: true, entries: entries.length, attested: true, outcome: "completed" });
    const attest = entries.at(-1);
    // The attestation names who started the run by a keyed digest of their token, never the token.
    expect(attest.body).toMatchObject({
      outcome: "completed",
      created_by: await principalOf("test-token", env.JOURNAL_SIGNING_KEY),
      output: { v: "x" },
    });
    expect(JSON.stringify(entries)).not.toContain("test-token");
    const completedSeqs = entries.filter((entry) => entry.kind === "node.completed").map((entry) => entry.seq);
    expect(attest.body.cited).toEqual(completedSeqs);
    for (let index = 0; index < entries.length; index += 1) {
      const tampered = structuredClone(entries);
      tampered[index].at = tampered[index].at.replace(/\d(?=Z$)/, (digit: string) => String((Number(digit) + 1) % 10));
      const broken = await verifyJournal(tampered, jwks);
      expect(broken.ok).toBe(false);
      expect(broken.ok === false && broken.seq).toBe(entries[index].seq);
    }
  });
});
