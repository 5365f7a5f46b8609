import { exports } from "cloudflare:workers";
import type { TrellisApi } from "../../src/rpc.ts";
import { describe, expect, it } from "vitest";
import { formatReport, verifyJournal } from "../../lib/journal/index.ts";
import {
  api,
  gateOpenOrSettled,
  journal,
  register,
  start,
  uniqueId,
  verifyRun,
  waitForRun,
  type Entry,
} from "./helpers.ts";

/**
 * `POST /v1/runs/{run_id}/erase` (docs/api.md; docs/security.md, "Erasure"):
 * an ended run's input, outputs, step results and answers are removed from
 * its state and its journal; the journal still verifies, closed by a signed
 * `erased` entry.
 */

const EMAIL = "ada@example.com";

/** A gate answered with a secret word, then a step that writes the input and the answer to the run's output. */
function workflow(id: string) {
  return {
    id,
    nodes: {
      ask: {
        output_mapping: { "output.word": "$.word" },
        task: {
          steps: [
            {
              ref: "ask",
              action: {
                kind: "human",
                implementation: {
                  prompt_template: "The word?",
                  input_schema: { type: "object", required: ["word"], properties: { word: { type: "string" } } },
                },
              },
              output_mapping: { "output.word": "$.response.word" },
            },
          ],
        },
      },
      greet: {
        depends_on: ["ask"],
        input_mapping: { email: "$.input.email", word: "$.output.word" },
        output_mapping: { "output.greeting": "$.greeting" },
        task: {
          steps: [
            {
              ref: "greet",
              action: {
                kind: "context",
                implementation: { updates: [{ path: "greeting", expr: "input.email + ' said ' + input.word" }] },
              },
              output_mapping: { "output.greeting": "$.greeting" },
            },
          ],
        },
      },
    },
  };
}

/** A run of the workflow, answered and completed. */
async function completedRun(): Promise<{ runId: string; workflowId: string }> {
  const workflowId = uniqueId("erase");
  await register({ workflows: [workflow(workflowId)] });
  const runId = await start(workflowId, { input: { email: EMAIL } });
  const waiting = await waitForRun(runId, gateOpenOrSettled);
  const answered = await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, {
    response: { word: "swordfish" },
  });
  expect(answered.status).toBe(200);
  const run = await waitForRun(runId);
  expect(run.status, JSON.stringify(run.error)).toBe("completed");
  expect(run.output).toEqual({ word: "swordfish", greeting: `${EMAIL} said swordfish` });
  return { runId, workflowId };
}

const textOf = (value: unknown) => JSON.stringify(value);

describe("erasing a run", () => {
  it("removes its data from the run, its nodes and its journal; the journal verifies before and after", async () => {
    const { runId } = await completedRun();
    const before = await journal(runId);
    expect(await verifyRun(runId)).toMatchObject({ ok: true, attested: true, sealed: { erased: [] } });
    expect(textOf(before)).toContain("swordfish");
    const sealedSeqs = before.filter((entry) => "$salt" in entry.body).map((entry) => entry.seq);
    expect(sealedSeqs.length).toBeGreaterThanOrEqual(4); // run.created, gate.answered, two task.completed, attest

    const erased = await api("POST", `/v1/runs/${runId}/erase`, { reason: "  the subject asked  " });
    expect(erased.status).toBe(200);
    expect(erased.json).toMatchObject({
      status: "completed",
      input: null,
      output: {},
      erased: { reason: "the subject asked", by: { token_id: expect.any(String) }, seqs: sealedSeqs, blobs: [] },
    });

    const run = (await api("GET", `/v1/runs/${runId}`)).json;
    expect(run.erased).toEqual(erased.json.erased);
    expect(Date.parse(run.erased.at)).toBeGreaterThan(0);
    const node = (await api("GET", `/v1/runs/${runId}/nodes/greet`)).json;
    const gates = (await api("GET", `/v1/runs/${runId}/gates`)).json;
    const after = await journal(runId);
    for (const [what, value] of Object.entries({ run, node, gates, journal: after })) {
      expect(textOf(value), what).not.toContain("swordfish");
      expect(textOf(value), what).not.toContain(EMAIL);
      expect(textOf(value), what).not.toContain("$salt");
    }

    // The same entries, with their values gone, and the signed erasure after the attestation.
    expect(after.map((entry) => entry.hash).slice(0, -1)).toEqual(before.map((entry) => entry.hash));
    const last = after.at(-1) as Entry;
    expect(last).toMatchObject({
      seq: before.length + 1,
      kind: "erased",
      prev: before.at(-1)?.hash,
      body: { reason: "the subject asked", seqs: sealedSeqs, blobs: [], by: run.erased.by },
    });
    expect((last as Entry & { sig: string }).sig).toMatch(/^[A-Za-z0-9_-]+$/);
    const report = await verifyRun(runId);
    expect(report).toMatchObject({
      ok: true,
      attested: true,
      outcome: "completed",
      erasure: { seq: last.seq, reason: "the subject asked" },
    });
    expect(report.ok && report.sealed?.erased.map((entry) => entry.seq)).toEqual(sealedSeqs);
    expect(formatReport(report)).toContain("verified with values erased");

    // The event stream ends with the erasure (nothing follows it).
    const stream = await exports.default.fetch(`http://trellis.test/v1/runs/${runId}/events`, {
      headers: { authorization: "Bearer test-token" },
    });
    const events = await stream.text();
    expect(events).toContain("event: erased");
    expect(events).not.toContain("swordfish");
  });

  it("catches a value put back that does not match its digest, and a tampered $sealed", async () => {
    const { runId } = await completedRun();
    await api("POST", `/v1/runs/${runId}/erase`, { reason: "tamper test" });
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    const entries = await journal(runId);
    const created = entries[0] as Entry;
    const forged = [
      { ...created, body: { ...created.body, input: { email: "eve@example.com" } } },
      ...entries.slice(1),
    ];
    expect(await verifyJournal(forged, jwks)).toMatchObject({ ok: false, reason: "bad_sealed_value", seq: 1 });
    const sealed = created.body["$sealed"] as Record<string, string>;
    const resealed = {
      ...created,
      body: { ...created.body, $sealed: { ...sealed, "/input": `sha256:${"a".repeat(64)}` } },
    };
    expect(await verifyJournal([resealed, ...entries.slice(1)], jwks)).toMatchObject({ ok: false, reason: "bad_hash" });
  });

  it("is done once: a second erase answers the erased run and writes no second entry", async () => {
    const { runId } = await completedRun();
    const first = await api("POST", `/v1/runs/${runId}/erase`, { reason: "first" });
    const second = await api("POST", `/v1/runs/${runId}/erase`, { reason: "second" });
    expect(second.status).toBe(200);
    expect(second.json.erased).toEqual(first.json.erased);
    expect((await journal(runId)).filter((entry) => entry.kind === "erased")).toHaveLength(1);
  });

  it("refuses a run that has not ended (409 run.not_terminal), a missing reason (400), and a redrive (409 run.erased)", async () => {
    const workflowId = uniqueId("erase-live");
    await register({ workflows: [workflow(workflowId)] });
    const runId = await start(workflowId, { input: { email: EMAIL } });
    await waitForRun(runId, gateOpenOrSettled);
    const live = await api("POST", `/v1/runs/${runId}/erase`, { reason: "too early" });
    expect(live.status).toBe(409);
    expect(live.json.error.code).toBe("run.not_terminal");
    for (const body of [{}, { reason: "" }, { reason: "   " }, { reason: "x".repeat(1_001) }, { reason: 3 }]) {
      const refused = await api("POST", `/v1/runs/${runId}/erase`, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
    }
    // Once it has ended (cancelled), it can be.
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { reason: "stop" })).status).toBe(200);
    await waitForRun(runId);
    expect((await api("POST", `/v1/runs/${runId}/erase`, { reason: "cancelled" })).status).toBe(200);
    expect((await journal(runId)).at(-1)?.kind).toBe("erased");
    expect(await verifyRun(runId)).toMatchObject({ ok: true, outcome: "cancelled" });
  });

  it("refuses to redrive an erased failed run: 409 run.erased", async () => {
    const workflowId = uniqueId("erase-failed");
    const failing = {
      id: workflowId,
      nodes: {
        boom: {
          task: {
            steps: [
              {
                ref: "boom",
                action: { kind: "context", implementation: { updates: [{ path: "x", expr: "input.missing.deeper" }] } },
              },
            ],
          },
        },
      },
    };
    await register({ workflows: [failing] });
    const runId = await start(workflowId, { input: { secret: "s3cret" } });
    expect((await waitForRun(runId)).status).toBe("failed");
    const erased = await api("POST", `/v1/runs/${runId}/erase`, { reason: "the subject asked" });
    expect(erased.status).toBe(200);
    expect(erased.json.controls).toEqual([]);
    const redrive = await api("POST", `/v1/runs/${runId}/redrive`, {});
    expect(redrive.status).toBe(409);
    expect(redrive.json.error.code).toBe("run.erased");
    expect(textOf((await api("GET", `/v1/runs/${runId}`)).json)).not.toContain("s3cret");
  });

  it("is refused to a token without the admin role (403)", async () => {
    const { runId } = await completedRun();
    const made = await api("POST", "/v1/tokens", { name: "runner only", roles: ["runner", "reader"] });
    const refused = await api("POST", `/v1/runs/${runId}/erase`, { reason: "not mine to erase" }, made.json.token);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe("auth.forbidden");
    expect((await api("GET", `/v1/runs/${runId}`)).json.erased).toBeUndefined();
  });

  it("is offered over Workers RPC as eraseRun(runId, reason), as an admin", async () => {
    const { runId } = await completedRun();
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    expect(await rpc.eraseRun(runId, "")).toMatchObject({ ok: false, error: { code: "request.invalid_body" } });
    const erased = await rpc.eraseRun(runId, "asked over RPC");
    expect(erased).toMatchObject({
      ok: true,
      value: { erased: { reason: "asked over RPC", by: { token_id: "rpc" } } },
    });
    expect(textOf(await journal(runId))).not.toContain("swordfish");
  });
});
