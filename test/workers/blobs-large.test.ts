import { describe, it } from "vitest";
import { isBlobRef } from "../../blobs/ref.ts";
import { httpTarget, journal, registerWorkflow, start, uniqueId, verified, waitForRun } from "./helpers.ts";

/**
 * The limit the issue of large values is about: an `http` step passes a 20 MiB body to
 * the next step, which sends it on. The body travels as a blob between them
 * (docs/architecture.md, "Blobs"); the receiving peer gets exactly those bytes.
 */

const MIB = 1024 * 1024;

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

describe("a 20 MiB body through two http steps", () => {
  it("reaches the second step's peer byte for byte", { timeout: 120_000 }, async ({ expect }) => {
    const id = uniqueId("blob-20mib");
    const bytes = 20 * MIB;
    await registerWorkflow({
      id,
      nodes: {
        get: {
          task: {
            steps: [
              {
                ref: "get",
                action: {
                  kind: "http",
                  implementation: {
                    method: "GET",
                    url_template: `${httpTarget()}/big?bytes=${bytes}`,
                    response: "text",
                  },
                },
                output_mapping: { "output.body": "$.body" },
              },
            ],
          },
        },
        post: {
          depends_on: ["get"],
          input_mapping: { data: "$.state.get.body" },
          task: {
            steps: [
              {
                ref: "post",
                action: {
                  kind: "http",
                  implementation: { method: "POST", url_template: `${httpTarget()}/sha256`, body: "$.input.data" },
                },
                output_mapping: { "output.received": "$.body" },
              },
            ],
          },
          output_mapping: { "output.received": "$.received" },
        },
      },
    });
    const started = performance.now();
    const runId = await start(id);
    const run = await waitForRun(runId, undefined, 110_000);
    const elapsed = performance.now() - started;
    console.log(`20 MiB through two http steps: ${elapsed.toFixed(0)} ms from start to completion`);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    // The body is sent as JSON (a structured `body`): the text in quotes.
    const sent = JSON.stringify("x".repeat(bytes));
    expect(run.output.received).toEqual({ sha256: await sha256Hex(sent), bytes: bytes + 2 });
    const entries = await journal(runId);
    const got = entries.find((entry) => entry.kind === "task.completed" && entry.body.node === "get");
    expect(isBlobRef(got?.body.output.body)).toBe(true);
    expect(got?.body.output.body.size).toBe(bytes + 2);
    expect(JSON.stringify(entries).length).toBeLessThan(64 * 1024);
    expect(await verified(runId)).toBe(true);
  });
});
