import { describe, it } from "vitest";
import type { Api, RequestOptions } from "../../cli/api.ts";
import { runCommand, type Io } from "../../cli/commands.ts";

/** `trellis run --wait` against a recording stand-in for the API: which requests it makes (docs/cli.md). */

interface Call {
  method: string;
  path: string;
  headers: Record<string, string>;
}

/** An Io whose API answers `answers[path]` and records each call and its body; what is printed is collected. */
function recording(answers: Record<string, unknown>): {
  io: Io;
  calls: Call[];
  bodies: unknown[];
  printed: () => string;
} {
  const calls: Call[] = [];
  const bodies: unknown[] = [];
  let printed = "";
  const api = {
    json: (method: string, path: string, options: RequestOptions = {}) => {
      calls.push({ method, path, headers: options.headers ?? {} });
      bodies.push(options.body);
      if (!(path in answers)) {
        return Promise.reject(new Error(`unexpected ${method} ${path}`));
      }
      return Promise.resolve(answers[path]);
    },
    stream: (path: string) => Promise.reject(new Error(`unexpected stream ${path}`)),
  } as unknown as Api;
  const out = { write: (text: string) => ((printed += text), true), isTTY: false } as unknown as NodeJS.WriteStream;
  return { io: { api, json: false, out }, calls, bodies, printed: () => printed };
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
  start_at: null,
  nodes: {},
  gates: [],
  waiting_for: [],
  priority: 5,
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

describe("trellis run --priority", () => {
  it("sends the run's priority with its start", async ({ expect }) => {
    const { io, bodies } = recording({
      "/v1/workflows/greet/runs": { run_id: RUN, status: "running", workflow: { id: "greet", version: 1 } },
    });
    expect(await runCommand(io, "greet", { priority: "8" })).toBe(0);
    expect(await runCommand(io, "greet", {})).toBe(0);
    expect(bodies).toEqual([{ input: {}, priority: 8 }, { input: {} }]);
  });

  it("refuses a priority that is not an integer from 0 to 9, before any request", async ({ expect }) => {
    for (const priority of ["10", "-1", "2.5", "high", ""]) {
      const { io, calls } = recording({});
      await expect(runCommand(io, "greet", { priority })).rejects.toMatchObject({ code: "cli.invalid_priority" });
      expect(calls).toEqual([]);
    }
  });
});

/** The plan of docs/api.md's preview example, plus a node that runs once per item of a list, when a flag holds. */
const PLAN = {
  layers: [["build"], ["deploy", "review"], ["notify"]],
  nodes: {
    build: {
      depends_on: [],
      task: { id: "build", version: 1 },
      workflow: null,
      workflow_choice: null,
      actions: [{ step: "compile", id: "build/compile", version: 0, kind: "context", risk: "low" }],
      when: null,
      foreach: null,
      high_risk: false,
    },
    deploy: {
      depends_on: ["build"],
      task: { id: "release/deploy", version: 0 },
      workflow: null,
      workflow_choice: null,
      actions: [{ step: "push", id: "push_release", version: 2, kind: "http", risk: "high" }],
      when: null,
      foreach: null,
      high_risk: true,
    },
    review: {
      depends_on: ["build"],
      task: null,
      workflow: null,
      workflow_choice: { from: "$.input.flow", allowed: ["fast", "slow"] },
      actions: [],
      when: "input.review",
      foreach: "$.state.build.files[*]",
      high_risk: false,
    },
    notify: {
      depends_on: ["deploy"],
      task: null,
      workflow: { id: "notify_flow", version: 3 },
      workflow_choice: null,
      actions: [],
      when: null,
      foreach: null,
      high_risk: false,
    },
  },
  high_risk: [{ node: "deploy", step: "push", action: "push_release@2" }],
};

describe("trellis run --mode preview", () => {
  it("prints the resolved plan: layers, what each node would run, and the high-risk steps", async ({ expect }) => {
    const { io, calls, printed } = recording({
      "/v1/workflows/release/runs": {
        run_id: null,
        status: "preview",
        workflow: { id: "release", version: 4 },
        plan: PLAN,
      },
    });
    expect(await runCommand(io, "release", { mode: "preview" })).toBe(0);
    expect(calls.map((call) => `${call.method} ${call.path}`)).toEqual(["POST /v1/workflows/release/runs"]);
    expect(printed()).toBe(
      [
        "preview: release@4, 4 node(s) in 3 layer(s); nothing ran",
        "  layer 1: build",
        "  layer 2: deploy, review",
        "  layer 3: notify",
        "  build  task build@1",
        "      compile  context  build/compile@0  risk low",
        "  deploy  task release/deploy@0  after build",
        "      push  http  push_release@2  risk high",
        "  review  workflow chosen by $.input.flow from fast, slow  after build  when input.review" +
          "  once per item of $.state.build.files[*]",
        "  notify  workflow notify_flow@3  after deploy",
        "high-risk, each waits for an approval: deploy/push (push_release@2)",
        "",
      ].join("\n"),
    );
  });
});
