import { describe, it } from "vitest";
import type { Api, RequestOptions } from "../../cli/api.ts";
import { runCommand, type Io } from "../../cli/commands.ts";

/** `trellis run --wait` against a recording stand-in for the API: which requests it makes (docs/cli.md). */

interface Call {
  method: string;
  path: string;
  headers: Record<string, string>;
}

/** An Io whose API answers `answers[path]` and records each call; what is printed is collected. */
function recording(answers: Record<string, unknown>): { io: Io; calls: Call[]; printed: () => string } {
  const calls: Call[] = [];
  let printed = "";
  const api = {
    json: (method: string, path: string, options: RequestOptions = {}) => {
      calls.push({ method, path, headers: options.headers ?? {} });
      if (!(path in answers)) {
        return Promise.reject(new Error(`unexpected ${method} ${path}`));
      }
      return Promise.resolve(answers[path]);
    },
    stream: (path: string) => Promise.reject(new Error(`unexpected stream ${path}`)),
  } as unknown as Api;
  const out = { write: (text: string) => ((printed += text), true), isTTY: false } as unknown as NodeJS.WriteStream;
  return { io: { api, json: false, out }, calls, printed: () => printed };
}

const RUN = "run_0123456789abcdef0123456789abcdef";
const view = (status: string) => ({
  run_id: RUN,
  workflow: { id: "greet", version: 1 },
  status,
  mode: "auto",
  input: {},
  output: status === "completed" ? { greeting: "Hello, Ada" } : null,
  error: null,
  created_at: "2026-11-24T00:00:00.000Z",
  updated_at: "2026-11-24T00:00:00.010Z",
  nodes: {},
  gates: [],
  usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
  parent: null,
  children: [],
});

describe("trellis run --wait", () => {
  it("asks the start to wait, and reads the run that had ended without following it", async ({ expect }) => {
    const { io, calls, printed } = recording({
      "/v1/workflows/greet/runs": { run_id: RUN, status: "completed", workflow: { id: "greet", version: 1 } },
      [`/v1/runs/${RUN}`]: view("completed"),
    });
    expect(await runCommand(io, "greet", { wait: true })).toBe(0);
    expect(calls.map((call) => `${call.method} ${call.path}`)).toEqual([
      "POST /v1/workflows/greet/runs",
      `GET /v1/runs/${RUN}`,
    ]);
    expect(calls[0]?.headers).toEqual({ prefer: "wait=60" });
    expect(printed()).toContain(`${RUN}  started`);
    expect(printed()).toContain("completed");
  });

  it("exits 1 when the run it waited for failed", async ({ expect }) => {
    const { io } = recording({
      "/v1/workflows/greet/runs": { run_id: RUN, status: "failed", workflow: { id: "greet", version: 1 } },
      [`/v1/runs/${RUN}`]: view("failed"),
    });
    expect(await runCommand(io, "greet", { wait: true })).toBe(1);
  });

  it("asks for no wait without --wait", async ({ expect }) => {
    const { io, calls } = recording({
      "/v1/workflows/greet/runs": { run_id: RUN, status: "running", workflow: { id: "greet", version: 1 } },
    });
    expect(await runCommand(io, "greet", {})).toBe(0);
    expect(calls).toEqual([{ method: "POST", path: "/v1/workflows/greet/runs", headers: {} }]);
  });
});
