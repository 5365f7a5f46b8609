import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { jsonSize, offloadValue } from "../../blobs/offload.ts";
import { blobKey, blobRefsIn, hasBlobRef, isBlobRef } from "../../blobs/ref.ts";
import { blobHolderWorkflows, getBlob, getBlobBytes, putBlob, releaseRunBlobs } from "../../blobs/store.ts";
import { canonicalBytes } from "../../lib/journal/canonical.ts";
import type { Json } from "../../schemas/common.ts";
import { uniqueId } from "./helpers.ts";

/** The blob module: references (pure) and the store (R2 bytes, D1 holder rows). */

const HEX = "a".repeat(64);

async function holders(digest: string): Promise<string[]> {
  const rows = await env.RUN_INDEX.prepare("SELECT run_id FROM blob_holders WHERE digest = ? ORDER BY run_id")
    .bind(digest)
    .all<{ run_id: string }>();
  return rows.results.map((row) => row.run_id);
}

describe("blob references", () => {
  it("are objects of exactly $blob, size and an optional media_type", ({ expect }) => {
    expect(isBlobRef({ $blob: `sha256:${HEX}`, size: 3 })).toBe(true);
    expect(isBlobRef({ $blob: `sha256:${HEX}`, size: 3, media_type: "text/plain" })).toBe(true);
    expect(isBlobRef({ $blob: `sha256:${HEX}`, size: 3, other: 1 })).toBe(false);
    expect(isBlobRef({ $blob: `sha256:${HEX.toUpperCase()}`, size: 3 })).toBe(false);
    expect(isBlobRef({ $blob: `sha256:${HEX}`, size: -1 })).toBe(false);
    expect(isBlobRef({ $blob: `sha256:${HEX}` })).toBe(false);
    expect(isBlobRef([`sha256:${HEX}`, 3])).toBe(false);
  });

  it("are found anywhere in a value, once per digest", ({ expect }) => {
    const a = { $blob: `sha256:${HEX}`, size: 1 };
    const b = { $blob: `sha256:${"b".repeat(64)}`, size: 2 };
    const value = { x: [a, { y: b }], z: a, w: "sha256:x" };
    expect(blobRefsIn(value)).toEqual([a, b]);
    expect(hasBlobRef(value)).toBe(true);
    expect(hasBlobRef({ x: [1, { y: "z" }] })).toBe(false);
    expect(blobKey(a.$blob)).toBe(`sha256/${HEX}`);
  });
});

describe("the blob store", () => {
  it("stores a value once, as its canonical JSON, with one holder row per run", async ({ expect }) => {
    const value = { text: "x".repeat(1000), n: uniqueId("v") };
    const first = await putBlob(env, value, { runId: uniqueId("run"), workflowId: "wf-a" });
    const second = await putBlob(env, value, { runId: uniqueId("run"), workflowId: "wf-b" });
    expect(second).toEqual(first);
    expect(first.size).toBe(canonicalBytes(value).byteLength);
    const listed = await env.BLOBS.list({ prefix: blobKey(first.$blob) });
    expect(listed.objects.length).toBe(1);
    expect(new TextDecoder().decode((await getBlobBytes(env, first.$blob)).bytes)).toBe(
      new TextDecoder().decode(canonicalBytes(value)),
    );
    expect(await getBlob(env, first)).toEqual(value);
    expect((await holders(first.$blob)).length).toBe(2);
    expect((await blobHolderWorkflows(env, first.$blob)).sort()).toEqual(["wf-a", "wf-b"]);
  });

  it("refuses bytes that do not hash to the digest (blob.corrupt), and a digest it has not (blob.not_found)", async ({
    expect,
  }) => {
    const ref = await putBlob(env, { v: uniqueId("t") }, { runId: uniqueId("run"), workflowId: "wf" });
    await env.BLOBS.put(blobKey(ref.$blob), '{"v":"tampered"}');
    await expect(getBlob(env, ref)).rejects.toMatchObject({ code: "blob.corrupt" });
    await expect(getBlobBytes(env, `sha256:${"0".repeat(64)}`)).rejects.toMatchObject({ code: "blob.not_found" });
  });

  it("releasing a run deletes the blobs only it held and keeps those another run holds", async ({ expect }) => {
    const [runA, runB] = [uniqueId("run"), uniqueId("run")];
    const shared = await putBlob(env, { shared: uniqueId("s") }, { runId: runA, workflowId: "wf" });
    await putBlob(
      env,
      { shared: ((await getBlob(env, shared)) as { shared: string }).shared },
      { runId: runB, workflowId: "wf" },
    );
    const own = await putBlob(env, { own: uniqueId("o") }, { runId: runA, workflowId: "wf" });

    const released = await releaseRunBlobs(env, runA);
    expect(released.deleted).toEqual([own.$blob]);
    expect(released.kept).toEqual([shared.$blob]);
    expect(await env.BLOBS.head(blobKey(own.$blob))).toBeNull();
    expect(await env.BLOBS.head(blobKey(shared.$blob))).not.toBeNull();
    expect(await holders(shared.$blob)).toEqual([runB]);
    expect(await releaseRunBlobs(env, runA)).toEqual({ deleted: [], kept: [] });

    expect((await releaseRunBlobs(env, runB)).deleted).toEqual([shared.$blob]);
    expect(await env.BLOBS.head(blobKey(shared.$blob))).toBeNull();
  });

  it("keeps a run's holder rows until its blobs are deleted, so a release that fails part way is finished by the next", async ({
    expect,
  }) => {
    const runId = uniqueId("run");
    const holder = { runId, workflowId: "wf-release" };
    const first = await putBlob(env, { text: "f".repeat(1000), n: uniqueId("v") }, holder);
    const second = await putBlob(env, { text: "s".repeat(1000), n: uniqueId("v") }, holder);
    // R2 fails after one delete: the release stops there.
    let deletes = 0;
    const failing = Object.create(env.BLOBS) as R2Bucket;
    failing.delete = async (key: string | string[]) => {
      deletes += 1;
      if (deletes > 1) {
        throw new Error("R2 is unavailable");
      }
      await env.BLOBS.delete(key);
    };
    await expect(releaseRunBlobs({ ...env, BLOBS: failing }, runId)).rejects.toThrow("R2 is unavailable");
    expect(await holders(first.$blob)).toEqual([runId]);
    expect(await holders(second.$blob)).toEqual([runId]);

    const retried = await releaseRunBlobs(env, runId);
    expect(retried.deleted.sort()).toEqual([first.$blob, second.$blob].sort());
    expect(await env.BLOBS.head(blobKey(first.$blob))).toBeNull();
    expect(await env.BLOBS.head(blobKey(second.$blob))).toBeNull();
    expect(await holders(first.$blob)).toEqual([]);
  });
});

describe("offloading a value, largest members first", () => {
  /** A writer that names each stored value by its index, for the test to read the shape. */
  const recorder = () => {
    const stored: unknown[] = [];
    const write = async (value: Json) => {
      stored.push(value);
      return { $blob: `sha256:${String(stored.length).padStart(64, "0")}`, size: jsonSize(value) };
    };
    return { stored, write };
  };

  it("leaves a value within the threshold as it is, and stores a large string whole", async ({ expect }) => {
    const { stored, write } = recorder();
    const small = { a: "x".repeat(100) };
    expect(await offloadValue(small, 1000, write)).toBe(small);
    expect(isBlobRef(await offloadValue("y".repeat(2000), 1000, write))).toBe(true);
    expect(stored).toEqual(["y".repeat(2000)]);
  });

  it("keeps an http result's status and headers inline and makes its body a blob", async ({ expect }) => {
    const { stored, write } = recorder();
    const body = "b".repeat(5000);
    const kept = (await offloadValue(
      { status: 200, headers: { "content-type": "text/plain" }, body },
      4096,
      write,
    )) as any;
    expect(kept.status).toBe(200);
    expect(kept.headers).toEqual({ "content-type": "text/plain" });
    expect(isBlobRef(kept.body)).toBe(true);
    expect(stored).toEqual([body]);
  });

  it("splits a large member by the same rule, and stores a list of small items as one blob", async ({ expect }) => {
    const { stored, write } = recorder();
    const items = Array.from({ length: 100 }, (_, i) => ({ n: i, pad: "p".repeat(50) }));
    const kept = (await offloadValue({ body: { title: "t", items } }, 4096, write)) as any;
    expect(kept.body.title).toBe("t");
    expect(isBlobRef(kept.body.items)).toBe(true);
    expect(stored).toEqual([items]);
    expect(jsonSize(kept)).toBeLessThanOrEqual(4096);
  });

  it("measures a value as the UTF-8 of its canonical JSON", ({ expect }) => {
    const value = { é: "€𝄞", a: [1, -0, 1e30] };
    expect(jsonSize(value)).toBe(canonicalBytes(value).byteLength);
  });
});
