import { env, exports } from "cloudflare:workers";
import type { TrellisApi } from "../../src/rpc.ts";
import { describe, it, vi } from "vitest";
import { blobKey, isBlobRef } from "../../blobs/ref.ts";
import { canonicalBytes } from "../../lib/journal/canonical.ts";
import {
  api,
  httpStep,
  httpTarget,
  journal,
  registerWorkflow,
  start,
  TOKEN,
  uniqueId,
  verified,
  waitForRun,
} from "./helpers.ts";

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

describe("a path alone", () => {
  it("reads into a blob no condition read first: an index, the last item, a wildcard", async ({ expect }) => {
    const id = uniqueId("blob-path");
    const url = await putDocument(uniqueId("doc"), { items: ITEMS });
    await registerWorkflow({
      id,
      nodes: {
        a: { task: { steps: [httpStep("get", url, { output_mapping: { "output.body": "$.body" } })] } },
        pick: {
          depends_on: ["a"],
          task: measure("input.third + ' ' + input.last + ' ' + string(size(input.names))"),
          input_mapping: {
            third: "$.state.a.body.items[3].name",
            last: "$.state.a.body.items[-1].name",
            names: "$.state.a.body.items[*].name",
          },
          output_mapping: { "output.said": "$.v" },
        },
      },
    });
    const run = await waitForRun(await start(id));
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.said).toBe("item-3 item-999 1000");
  });
});

describe("a blob whose bytes were changed", () => {
  it("is never used by a step (blob.corrupt) nor served (502)", async ({ expect }) => {
    const id = uniqueId("blob-tamper");
    await registerWorkflow({
      id,
      nodes: { size: { task: measure("size(input.data)"), input_mapping: { data: "$.input.data" } } },
    });
    const data = `${uniqueId("t")}${"z".repeat(BIG)}`;
    const first = await waitForRun(await start(id, { input: { data } }));
    expect(first.status).toBe("completed");
    const ref = first.input.data;
    const served = await fetchBlob(ref.$blob);
    expect(served.status).toBe(200);
    expect(served.headers.get("content-type")).toBe("application/json");
    expect(await sha256Hex(new Uint8Array(await served.arrayBuffer()))).toBe(ref.$blob.slice("sha256:".length));

    // The same length, other bytes: only the digest tells.
    await env.BLOBS.put(blobKey(ref.$blob), JSON.stringify(data.replace(/z$/, "!")));
    const second = await waitForRun(await start(id, { input: { data } }));
    expect(second.status).toBe("failed");
    expect(second.error.code).toBe("blob.corrupt");
    // The coordinator does not use it either: a condition that reads into it fails its node.
    const reads = uniqueId("blob-tamper-when");
    await registerWorkflow({ id: reads, nodes: { check: { task: measure("1"), when: "size(input.data) > 0" } } });
    const third = await waitForRun(await start(reads, { input: { data } }));
    expect(third.status).toBe("failed");
    expect(third.error).toMatchObject({ code: "blob.corrupt", node: "check" });
    const refused = await fetchBlob(ref.$blob);
    expect(refused.status).toBe(502);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("blob.corrupt");
  });
});

async function fetchBlob(digest: string, token = TOKEN): Promise<Response> {
  return exports.default.fetch(`http://trellis.test/v1/blobs/${digest}`, {
    headers: { authorization: `Bearer ${token}` },
  });
}

describe("GET /v1/blobs/{digest}", () => {
  it("serves a blob to a reader of a workflow whose run holds it, and to no other", async ({ expect }) => {
    const id = uniqueId("blob-auth");
    await registerWorkflow({
      id,
      nodes: { size: { task: measure("size(input.data)"), input_mapping: { data: "$.input.data" } } },
    });
    const run = await waitForRun(await start(id, { input: { data: `${uniqueId("a")}${"q".repeat(BIG)}` } }));
    const digest = run.input.data.$blob;
    const token = async (workflows: string[]) =>
      (await api("POST", "/v1/tokens", { name: uniqueId("reader"), roles: ["reader"], workflows })).json.token;
    expect((await fetchBlob(digest, await token([id]))).status).toBe(200);
    const elsewhere = await fetchBlob(digest, await token(["elsewhere-*"]));
    expect(elsewhere.status).toBe(404);
    expect(((await elsewhere.json()) as { error: { code: string } }).error.code).toBe("blob.not_found");
    expect((await fetchBlob(`sha256:${"0".repeat(64)}`)).status).toBe(404);
    expect((await fetchBlob("sha256:nothex")).status).toBe(400);
    // Over Workers RPC (an admin of this account): the same bytes.
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const read = await rpc.getBlob(digest);
    expect(read.ok && read.value.media_type).toBe("application/json");
    expect(read.ok && (await sha256Hex(new Uint8Array(read.value.bytes)))).toBe(digest.slice("sha256:".length));
  });
});

describe("values that enter a waiting run", () => {
  it("a gate answer over the threshold is kept as a blob, and the next step sees the value", async ({ expect }) => {
    const id = uniqueId("blob-gate");
    await registerWorkflow({
      id,
      nodes: {
        ask: {
          task: {
            steps: [
              {
                ref: "ask",
                action: {
                  kind: "human",
                  implementation: { prompt_template: "Paste it", input_schema: { type: "object" } },
                },
                output_mapping: { "output.answer": "$" },
              },
            ],
          },
        },
        size: {
          depends_on: ["ask"],
          task: measure("size(input.text)"),
          input_mapping: { text: "$.state.ask.answer.response.text" },
          output_mapping: { "output.size": "$.v" },
        },
      },
    });
    const runId = await start(id);
    await waitForRun(runId, (run) => run.gates?.some((gate: { status: string }) => gate.status === "open"));
    const gateId = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0].gate_id;
    const text = "g".repeat(BIG);
    expect((await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { text } })).status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.size).toBe(BIG);
    const answered = (await journal(runId)).find((entry) => entry.kind === "gate.answered");
    expect(isBlobRef(answered?.body.response.text)).toBe(true);
    expect(await verified(runId)).toBe(true);
  });

  it("a signal's and an event's data over the threshold are kept as blobs, and the steps see the values", async ({
    expect,
  }) => {
    const id = uniqueId("blob-event");
    const name = uniqueId("big-event");
    const waitFor = (ref: string, event: string) => ({
      ref,
      action: { kind: "event", implementation: { name: event } },
      output_mapping: { "output.got": "$" },
    });
    await registerWorkflow({
      id,
      nodes: {
        signal: { task: { steps: [waitFor("signal", "signalled")] } },
        event: { task: { steps: [waitFor("event", name)] } },
        sizes: {
          depends_on: ["signal", "event"],
          task: measure("size(input.signal) + size(input.event)"),
          input_mapping: { signal: "$.state.signal.got.data.text", event: "$.state.event.got.data.text" },
          output_mapping: { "output.sizes": "$.v" },
        },
      },
    });
    const runId = await start(id);
    await waitForRun(
      runId,
      (run) => run.waiting_for?.filter((wait: { kind: string }) => wait.kind === "event").length === 2,
    );
    const signalled = await api("POST", `/v1/runs/${runId}/signals`, {
      name: "signalled",
      data: { text: "s".repeat(BIG) },
    });
    expect(signalled.status).toBe(202);
    expect((await api("POST", "/v1/events", { name, data: { text: "e".repeat(BIG + 1) } })).status).toBe(202);
    const run = await waitForRun(runId);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.sizes).toBe(2 * BIG + 1);
    const entries = await journal(runId);
    expect(JSON.stringify(entries)).not.toContain("s".repeat(1000));
    expect(JSON.stringify(entries)).not.toContain("e".repeat(1000));
    expect(await verified(runId)).toBe(true);
  });
});

describe("x-trellis-sensitive", () => {
  it("makes an input field a blob whatever its size, which steps read as the value", async ({ expect }) => {
    const id = uniqueId("blob-sensitive");
    await registerWorkflow({
      id,
      input_schema: {
        type: "object",
        required: ["email"],
        properties: { email: { "type": "string", "x-trellis-sensitive": true }, plan: { type: "string" } },
      },
      nodes: {
        greet: {
          task: measure("'mail ' + input.email"),
          input_mapping: { email: "$.input.email" },
          output_mapping: { "output.said": "$.v" },
        },
      },
    });
    const run = await waitForRun(await start(id, { input: { email: "ada@example.com", plan: "pro" } }));
    expect(run.status).toBe("completed");
    expect(run.output.said).toBe("mail ada@example.com");
    expect(run.input.plan).toBe("pro");
    expect(run.input.email).toEqual({
      $blob: `sha256:${await sha256Hex(canonicalBytes("ada@example.com"))}`,
      size: canonicalBytes("ada@example.com").byteLength,
    });
    // The input as journaled holds the digest only (what a step derives from it is the step's output).
    expect(JSON.stringify(await createdInput(run.run_id))).not.toContain("ada@example.com");
    const invalid = await api("POST", `/v1/workflows/${id}/runs`, { input: { email: 42 } });
    expect(invalid.status).toBe(400);
  });
});

describe("erasing a run that holds blobs", () => {
  it("deletes the blobs only it holds, keeps one another run holds, and its journal verifies before and after", async ({
    expect,
  }) => {
    const id = uniqueId("blob-erase");
    await registerWorkflow({
      id,
      input_schema: {
        type: "object",
        properties: { email: { "type": "string", "x-trellis-sensitive": true }, doc: { type: "string" } },
      },
      nodes: { size: { task: measure("size(input.doc)"), input_mapping: { doc: "$.input.doc" } } },
    });
    const email = `${uniqueId("ada")}@example.com`;
    const doc = `${uniqueId("doc")}${"d".repeat(BIG)}`;
    const erased = await waitForRun(await start(id, { input: { email, doc } }));
    const other = await waitForRun(await start(id, { input: { email: "grace@example.com", doc } }));
    expect([erased.status, other.status]).toEqual(["completed", "completed"]);
    const own: string = erased.input.email.$blob;
    const shared: string = erased.input.doc.$blob;
    expect(other.input.doc.$blob).toBe(shared);
    expect(await verified(erased.run_id)).toBe(true);

    const answer = await api("POST", `/v1/runs/${erased.run_id}/erase`, { reason: "the subject asked" });
    expect(answer.status).toBe(200);
    expect([...answer.json.erased.blobs].sort()).toEqual([own, shared].sort());
    expect(await env.BLOBS.head(blobKey(own))).toBeNull();
    expect((await fetchBlob(own)).status).toBe(404);
    // The document another run holds too stays, for that run only.
    expect(await holders(shared)).toEqual([other.run_id]);
    expect((await fetchBlob(shared)).status).toBe(200);
    const entries = await journal(erased.run_id);
    expect(entries.find((entry) => entry.kind === "run.created")?.body.input).toBeUndefined();
    expect(entries.at(-1)?.kind).toBe("erased");
    expect(await verified(erased.run_id)).toBe(true);
  });
});

describe("an event trigger over an event whose data is a blob", () => {
  it("reads into the data for its `if` and `input`, and hands a part it takes whole on as a reference", async ({
    expect,
  }) => {
    const id = uniqueId("blob-trigger");
    const name = uniqueId("big.upload");
    await registerWorkflow({
      id,
      triggers: [
        {
          event: name,
          if: "event.data.items[3].name == 'item-3'",
          input: { first: "$.data.items[0].name", all: "$.data" },
        },
      ],
      nodes: {
        count: {
          task: measure("input.first + ' of ' + string(size(input.all.items))"),
          input_mapping: { first: "$.input.first", all: "$.input.all" },
          output_mapping: { "output.said": "$.v" },
        },
      },
    });
    const eventId = uniqueId("evt");
    expect((await api("POST", "/v1/events", { name, id: eventId, data: { items: ITEMS } })).status).toBe(202);
    let runId: string | undefined;
    await vi.waitUntil(
      async () => {
        const triggers = (await api("GET", `/v1/events/${eventId}/triggers?name=${name}`)).json;
        runId = triggers.starts?.find((start: { status: string }) => start.status === "started")?.run_id;
        return runId !== undefined || triggers.starts?.some((start: { status: string }) => start.status === "failed");
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(runId).toBeDefined();
    const run = await waitForRun(String(runId));
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.said).toBe("item-0 of 1000");
    expect(run.input.first).toBe("item-0");
    expect(isBlobRef(run.input.all.items)).toBe(true);
  });
});

describe("a child run given a blob reference", () => {
  it("holds the blob too, checks its input against the value, and its steps read it", async ({ expect }) => {
    const child = uniqueId("blob-child");
    const parent = uniqueId("blob-parent");
    await registerWorkflow({
      id: child,
      input_schema: { type: "object", required: ["data"], properties: { data: { type: "string", minLength: BIG } } },
      nodes: {
        size: {
          task: measure("size(input.data)"),
          input_mapping: { data: "$.input.data" },
          output_mapping: { "output.size": "$.v" },
        },
      },
    });
    await registerWorkflow({
      id: parent,
      nodes: {
        call: { workflow: child, input_mapping: { data: "$.input.data" }, output_mapping: { "output.child": "$" } },
      },
    });
    const data = `${uniqueId("c")}${"k".repeat(BIG)}`;
    const run = await waitForRun(await start(parent, { input: { data } }));
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.child.size).toBe(data.length);
    const started = (await journal(run.run_id)).find((entry) => entry.kind === "child.started");
    const childRunId = started?.body.run_id ?? started?.body.child_run_id;
    expect(typeof childRunId).toBe("string");
    const childRun = await waitForRun(String(childRunId));
    expect(childRun.input.data).toEqual(run.input.data);
    expect(await holders(run.input.data.$blob)).toEqual([run.run_id, childRunId].sort());
  });
});
