import { beforeAll, describe, it } from "vitest";
import { api, httpTarget, journal, register, registerWorkflow, uniqueId, verifyRun, waitForRun } from "./helpers.ts";

/**
 * Who caused each signed entry an outside call causes: `by` on run.created,
 * gate answers, approvals, controls, redrive, compensate, signals and events,
 * in real runs, every journal verified offline.
 */

type Entry = { kind: string; body: Record<string, unknown> };

let token = "";
let by: { token_id: string; name: string };

beforeAll(async () => {
  const made = await api("POST", "/v1/tokens", { name: "ops desk", roles: ["runner", "approver", "reader", "author"] });
  token = made.json.token;
  by = { token_id: made.json.token_id, name: "ops desk" };
});

const as = (method: string, path: string, body?: unknown) => api(method, path, body, token);

async function startAs(workflow: string, body: Record<string, unknown> = {}): Promise<string> {
  const started = await as("POST", `/v1/workflows/${workflow}/runs`, { input: {}, ...body });
  if (started.status !== 201) {
    throw new Error(`not started: ${JSON.stringify(started.json)}`);
  }
  return started.json.run_id;
}

/** The bodies of the run's entries of `kind`. */
async function bodiesOf(runId: string, kind: string): Promise<Record<string, unknown>[]> {
  return ((await journal(runId)) as Entry[]).filter((entry) => entry.kind === kind).map((entry) => entry.body);
}

const eventStep = (ref: string, name: string) => ({
  ref,
  // A minute of lookback: an event sent before the wait registers is still taken.
  action: { kind: "event", implementation: { name, lookback_ms: 60_000 } },
});

const humanStep = {
  ref: "ask",
  action: {
    kind: "human",
    implementation: {
      prompt_template: "Go?",
      input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
    },
  },
};

const riskyStep = {
  ref: "risky",
  action: {
    kind: "http",
    risk: "high",
    implementation: { method: "GET", url_template: `${httpTarget()}/json?x=1` },
  },
};

const openGate = async (runId: string): Promise<string> => {
  const run = await waitForRun(runId, (view) => view.gates?.some((gate: { status: string }) => gate.status === "open"));
  return run.gates.find((gate: { status: string }) => gate.status === "open").gate_id;
};

describe("who caused each entry (by)", () => {
  it("is on a start, a gate's link and answer, a signal and an event the token sent", async ({ expect }) => {
    const id = uniqueId("by-flow");
    const [signal, event] = [uniqueId("by-signal"), uniqueId("by-event")];
    await registerWorkflow({
      id,
      nodes: {
        ask: { task: { steps: [humanStep] } },
        hear: { depends_on: ["ask"], task: { steps: [eventStep("hear", signal)] } },
        news: { depends_on: ["hear"], task: { steps: [eventStep("news", event)] } },
      },
    });
    const runId = await startAs(id);
    const gateId = await openGate(runId);
    const link = await as("POST", `/v1/runs/${runId}/gates/${gateId}/links`, { approver: "ops@example.com" });
    expect(link.status).toBe(201);
    expect((await as("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: true } })).status).toBe(200);
    expect((await as("POST", `/v1/runs/${runId}/signals`, { name: signal })).status).toBe(202);
    expect((await as("POST", "/v1/events", { name: event })).status).toBe(202);
    expect((await waitForRun(runId)).status).toBe("completed");
    expect((await bodiesOf(runId, "run.created"))[0]?.by).toEqual(by);
    expect((await bodiesOf(runId, "gate.answered"))[0]?.by).toEqual(by);
    // Making a link is signed with who made it: the link's id, approver and expiry, never its secret.
    const [made] = await bodiesOf(runId, "gate.link_created");
    expect(made).toEqual({
      gate_id: gateId,
      node: "ask",
      step: expect.any(String),
      link_id: link.json.link_id,
      approver: "ops@example.com",
      expires_at: link.json.expires_at,
      by,
    });
    expect(JSON.stringify(made)).not.toContain(String(link.json.url).split("/").at(-1));
    expect((await bodiesOf(runId, "signal.received"))[0]?.by).toEqual(by);
    const matched = await bodiesOf(runId, "event.matched");
    expect(matched.map((body) => [body.source, body.by])).toEqual([
      ["signal", by],
      ["event", by],
    ]);
    expect((await verifyRun(runId)).ok).toBe(true);
  });

  it("is on approvals granted and rejected, and on an approve of a run created for approval", async ({ expect }) => {
    const id = uniqueId("by-approval");
    await registerWorkflow({ id, nodes: { risky: { task: { steps: [riskyStep] } } } });
    const granted = await startAs(id, { mode: "approval" });
    await as("POST", `/v1/runs/${granted}/approve`);
    await as("POST", `/v1/runs/${granted}/gates/${await openGate(granted)}`, { response: { approved: true } });
    expect((await waitForRun(granted)).status).toBe("completed");
    const started = (await bodiesOf(granted, "run.status")).find((body) => body.reason === "started");
    expect(started).toEqual({ from: "drafting", to: "queued", reason: "started", by });
    expect((await bodiesOf(granted, "approval.granted"))[0]?.by).toEqual(by);
    const rejected = await startAs(id);
    await as("POST", `/v1/runs/${rejected}/gates/${await openGate(rejected)}`, {
      response: { approved: false, reason: "no" },
    });
    expect((await waitForRun(rejected)).status).toBe("failed");
    expect((await bodiesOf(rejected, "approval.rejected"))[0]).toMatchObject({ reason: "no", by });
    for (const runId of [granted, rejected]) {
      expect((await verifyRun(runId)).ok, runId).toBe(true);
    }
  });

  it("is on the transitions pause, resume and cancel cause, and not on those the engine makes", async ({ expect }) => {
    const id = uniqueId("by-controls");
    await registerWorkflow({ id, nodes: { ask: { task: { steps: [humanStep] } } } });
    const runId = await startAs(id);
    await openGate(runId);
    for (const control of ["pause", "resume"]) {
      expect((await as("POST", `/v1/runs/${runId}/${control}`)).status, control).toBe(200);
    }
    expect((await as("POST", `/v1/runs/${runId}/cancel`, { reason: "enough" })).status).toBe(200);
    await waitForRun(runId);
    const statuses = await bodiesOf(runId, "run.status");
    const caused = statuses.filter((body) => body.by !== undefined).map((body) => [body.reason, body.by]);
    expect(caused).toEqual([
      ["paused by request", by],
      ["resumed by request", by],
      ["enough", by],
    ]);
    // The engine's own moves (started at creation, dispatching, waiting) carry no by.
    expect(statuses.find((body) => body.reason === "dispatching")?.by).toBeUndefined();
    expect((await verifyRun(runId)).ok).toBe(true);
  });

  it("is on a redrive and on a compensation started by hand", async ({ expect }) => {
    const key = uniqueId("by-saga");
    const make = uniqueId("by-make");
    const remove = uniqueId("by-remove");
    const failing = {
      ref: "boom",
      action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
    };
    const workflow = {
      id: uniqueId("by-saga"),
      compensate: "never",
      nodes: {
        a: { task: { steps: [{ ref: "make", action: make, input_mapping: { id: "a", key } }] } },
        b: { depends_on: ["a"], task: { steps: [failing] } },
      },
    };
    await register({
      actions: [
        { id: remove, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/mark/{{key}}` } },
        {
          id: make,
          kind: "http",
          implementation: { method: "GET", url_template: `${httpTarget()}/json?id={{id}}` },
          undo: { action: remove, input_mapping: { key: "$.input.key" } },
        },
      ],
      workflows: [workflow],
    });
    const runId = await startAs(workflow.id);
    expect((await waitForRun(runId)).status).toBe("failed");
    expect((await as("POST", `/v1/runs/${runId}/redrive`)).status).toBe(200);
    await waitForRun(runId, (run) => run.status === "failed" && run.nodes.b.attempts === 2);
    expect((await bodiesOf(runId, "run.redriven"))[0]).toMatchObject({ redrive: 1, by });
    expect((await bodiesOf(runId, "run.status")).find((body) => body.reason === "redrive 1")?.by).toEqual(by);
    expect((await as("POST", `/v1/runs/${runId}/compensate`)).status).toBe(200);
    await waitForRun(runId, (run) => run.compensation?.status === "completed");
    expect((await bodiesOf(runId, "compensation.started"))[0]).toMatchObject({ trigger: "manual", by });
    expect((await verifyRun(runId)).ok).toBe(true);
  });
});
