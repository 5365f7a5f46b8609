import { abortAllDurableObjects, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, it, vi } from "vitest";
import { verifyJournal } from "../../lib/journal/index.ts";
import { api, uniqueId, waitForRun, httpTarget, hits, httpStep } from "./helpers.ts";
import { stubOf } from "./durable-helpers.ts";

/** A chain a → b → c whose nodes each call the http target (slowly), so a crash can land mid-node. */
async function registerChain(key: string): Promise<string> {
  const id = uniqueId("chain");
  const node = (name: string, previous: string | null) => ({
    ...(previous
      ? { depends_on: [previous], input_mapping: { n: `$.state.${previous}.n` } }
      : { input_mapping: { n: "$.input.n" } }),
    task: {
      steps: [
        httpStep("call", `${httpTarget()}/slow/${key}-${name}?ms=150`, { output_mapping: {} }),
        {
          ref: "add",
          action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } },
          output_mapping: { "output.n": "$.n" },
        },
      ],
    },
  });
  const response = await api("POST", "/v1/definitions", {
    workflows: [
      {
        id,
        nodes: {
          a: node("a", null),
          b: node("b", "a"),
          c: { ...node("c", "b"), output_mapping: { "output.n": "$.n" } },
        },
      },
    ],
  });
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return id;
}

describe("crash safety", () => {
  for (const [label, crash] of [
    ["evicted", (runId: string) => evictDurableObject(stubOf(runId))],
    ["aborted", () => abortAllDurableObjects()],
  ] as const) {
    it(`finishes with the same output when the coordinator is ${label} at several points, never re-running a completed node`, async ({
      expect,
    }) => {
      const key = uniqueId("crash");
      const id = await registerChain(key);
      const start = await api("POST", `/v1/workflows/${id}/runs`, { input: { n: 0 } });
      const runId: string = start.json.run_id;
      for (const node of ["a", "b", "c"]) {
        await waitForRun(runId, (run) => run.nodes[node].status === "running" || run.status === "completed");
        await crash(runId);
      }
      const run = await waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.output).toEqual({ n: 3 });
      const entries = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
      // Each node completed exactly once; a lost in-flight attempt may have been re-dispatched.
      for (const node of ["a", "b", "c"]) {
        expect(
          entries.filter(
            (entry: { kind: string; body: { node?: string } }) =>
              entry.kind === "node.completed" && entry.body.node === node,
          ),
        ).toHaveLength(1);
        const calls = await hits(`${key}-${node}`);
        expect(calls).toBeGreaterThanOrEqual(1);
        expect(calls).toBeLessThanOrEqual(2);
      }
      if (label === "aborted") {
        // An abort cuts the executor calls in flight: the coordinator must notice and re-dispatch.
        expect(entries.filter((entry: { kind: string }) => entry.kind === "task.lost").length).toBeGreaterThanOrEqual(
          1,
        );
      }
      const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
      expect(await verifyJournal(entries, jwks, { requireAttestation: true })).toMatchObject({ ok: true });
    });
  }

  it("signs on restart the entries a wide wave committed unsigned, exactly as it would have", async ({ expect }) => {
    // A wide wave commits its decision with the journal entries unsigned, sends the
    // work, then signs. Here the crash is staged: the wave's signed entries are put
    // back to the unsigned state they had before signing, and the object is aborted.
    const key = uniqueId("unsigned");
    const id = uniqueId("wide");
    const task = {
      steps: [httpStep("call", `${httpTarget()}/slow/${key}?ms=1500`)],
    };
    const registered = await api("POST", "/v1/definitions", {
      workflows: [{ id, nodes: { each: { foreach: { items: "$.input.items" }, task } } }],
    });
    expect(registered.status).toBe(201);
    const start = await api("POST", `/v1/workflows/${id}/runs`, {
      input: { items: Array.from({ length: 20 }, (_, i) => i) },
    });
    const runId: string = start.json.run_id;
    type Entry = { seq: number; kind: string; at: string; body: unknown };
    const signedWave = async () => {
      const entries = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries as Entry[];
      return entries.filter((entry) => entry.kind === "task.dispatched").length === 20 ? entries : undefined;
    };
    // The start answers once the wave is sent; its entries are signed a moment later (SIGN_AFTER_SEND_MS).
    const before = await vi.waitUntil(signedWave, { timeout: 5_000, interval: 10 });
    const wave = before.filter((entry) => entry.kind === "task.dispatched");
    expect(wave).toHaveLength(20);
    const cut = (wave[0]?.seq ?? 0) - 1;
    const stub = stubOf(runId);
    await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      for (const entry of before.filter((one) => one.seq > cut)) {
        sql.exec(
          "INSERT INTO journal_unsigned (seq, fields) VALUES (?, ?)",
          entry.seq,
          JSON.stringify({ seq: entry.seq, kind: entry.kind, at: entry.at, body: entry.body }),
        );
      }
      // The journal as it stood before the wave was signed: a page (a commit's entries) past the cut goes, one across it is cut short.
      const pages = sql
        .exec<{ last_seq: number; entries: string }>(
          "SELECT last_seq, entries FROM journal_pages WHERE last_seq > ?",
          cut,
        )
        .toArray();
      for (const page of pages) {
        sql.exec("DELETE FROM journal_pages WHERE last_seq = ?", page.last_seq);
        const kept = (JSON.parse(page.entries) as { seq: number }[]).filter((entry) => entry.seq <= cut);
        const last = kept.at(-1);
        if (last !== undefined) {
          sql.exec("INSERT INTO journal_pages (last_seq, entries) VALUES (?, ?)", last.seq, JSON.stringify(kept));
        }
      }
    });
    // Aborted, not evicted: in this test runtime an evicted object's executor streams
    // still deliver into the old instance, which a real restart would not allow.
    await abortAllDurableObjects();

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const after = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries as { seq: number }[];
    // Ed25519 signatures are deterministic: the re-signed entries are the very same entries.
    expect(after.slice(0, before.length)).toEqual(before);
    // The abort also cut the calls in flight: those items ran again (task.lost), none was lost.
    expect(await hits(key)).toBeGreaterThanOrEqual(20);
    expect(run.nodes.each.items).toMatchObject({ total: 20, completed: 20 });
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect(await verifyJournal(after, jwks, { requireAttestation: true })).toMatchObject({ ok: true });
  });
});
