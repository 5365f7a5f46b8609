import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { blobKey, isBlobRef } from "../../blobs/ref.ts";
import { canonicalBytes } from "../../lib/journal/canonical.ts";
import { httpStep, httpTarget, journal, registerWorkflow, start, uniqueId, verified, waitForRun } from "./helpers.ts";

/**
 * Large values as blobs (docs/architecture.md, "Blobs"): over the threshold (64 KiB of
 * canonical JSON) a value entering a run is stored once in R2 and stands in the run's
 * state and journal as a `{ $blob, size }` reference, while steps, mappings and CEL see
 * the value.
 */

const BIG = 100_000;

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");
}

async function holders(digest: string): Promise<string[]> {
  const rows = await env.RUN_INDEX.prepare("SELECT run_id FROM blob_holders WHERE digest = ? ORDER BY run_id")
    .bind(digest)
    .all<{ run_id: string }>();
  return rows.results.map((row) => row.run_id);
}

/** A task of one `context` step: `output.v` is `expr` over the step input (the node input). */
const measure = (expr: string) => ({
  steps: [
    {
      ref: "m",
      action: { kind: "context", implementation: { updates: [{ path: "v", expr }] } },
      output_mapping: { "output.v": "$.v" },
    },
  ],
});

/** The input of the run's `run.created` entry. */
async function createdInput(runId: string): Promise<any> {
  return (await journal(runId)).find((entry) => entry.kind === "run.created")?.body.input;
}

describe("a large run input", () => {
  it("is stored once however many runs carry it, each run holding it, and its steps see the value", async ({
    expect,
  }) => {
    const id = uniqueId("blob-input");
    await registerWorkflow({
      id,
      nodes: {
        size: {
          task: measure("size(input.data)"),
          input_mapping: { data: "$.input.data" },
          output_mapping: { "output.size": "$.v" },
        },
      },
    });
    const data = `${uniqueId("d")}${"y".repeat(BIG)}`;
    const [first, second] = [await start(id, { input: { data } }), await start(id, { input: { data } })];
    const runs = [await waitForRun(first), await waitForRun(second)];
    expect(runs.map((run) => run.status)).toEqual(["completed", "completed"]);
    expect(runs.map((run) => run.output.size)).toEqual([data.length, data.length]);

    const ref = (await createdInput(first)).data;
    expect(isBlobRef(ref)).toBe(true);
    expect(runs[0].input.data).toEqual(ref);
    expect(ref).toEqual({
      $blob: `sha256:${await sha256Hex(canonicalBytes(data))}`,
      size: canonicalBytes(data).byteLength,
    });
    expect((await createdInput(second)).data).toEqual(ref);
    expect((await env.BLOBS.list({ prefix: blobKey(ref.$blob) })).objects.length).toBe(1);
    expect(await holders(ref.$blob)).toEqual([first, second].sort());
    expect(await verified(first)).toBe(true);
  });
});

/** Puts a JSON document on the HTTP target, for a step to GET. */
async function putDocument(key: string, value: unknown): Promise<string> {
  const url = `${httpTarget()}/document/${key}`;
  const put = await fetch(url, { method: "PUT", body: JSON.stringify(value) });
  if (put.status !== 204) {
    throw new Error(`PUT ${url}: ${put.status}`);
  }
  return url;
}

/** A thousand small items: over the threshold together, none worth a blob of its own, so the list is one blob. */
const ITEMS = Array.from({ length: 1000 }, (_, i) => ({ name: `item-${i}`, pad: "p".repeat(80) }));

describe("mappings and conditions over a blob", () => {
  it("read into it, and a path that takes it whole passes its reference on", async ({ expect }) => {
    const id = uniqueId("blob-read");
    const url = await putDocument(uniqueId("doc"), { items: ITEMS });
    const after = { depends_on: ["a"] };
    await registerWorkflow({
      id,
      nodes: {
        a: { task: { steps: [httpStep("get", url, { output_mapping: { "output.body": "$.body" } })] } },
        pick: {
          ...after,
          task: measure("input.name"),
          input_mapping: { name: "$.state.a.body.items[3].name" },
          output_mapping: { "output.picked": "$.v" },
        },
        yes: {
          ...after,
          when: "state.a.body.items[3].name == 'item-3'",
          task: measure("'ran'"),
          output_mapping: { "output.yes": "$.v" },
        },
        no: {
          ...after,
          when: "state.a.body.items[3].name == 'other'",
          task: measure("'ran'"),
          output_mapping: { "output.no": "$.v" },
        },
        whole: {
          ...after,
          task: measure("size(input.body.items)"),
          input_mapping: { body: "$.state.a.body" },
          output_mapping: { "output.count": "$.v" },
        },
      },
    });
    const run = await waitForRun(await start(id));
    expect(run.error).toBeNull();
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ picked: "item-3", yes: "ran", count: 1000 });
    expect(run.nodes.no.status).toBe("skipped");

    const entries = await journal(run.run_id);
    const completed = entries.find((entry) => entry.kind === "task.completed" && entry.body.node === "a");
    expect(isBlobRef(completed?.body.output.body.items)).toBe(true);
    // Neither the journal nor the run's state holds the list itself: only its reference, wherever it went.
    expect(JSON.stringify(entries)).not.toContain("item-999");
    expect(await verified(run.run_id)).toBe(true);
  });
});
