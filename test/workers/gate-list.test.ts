import { describe, it, vi } from "vitest";
import { OpenGateList } from "../../schemas/index.ts";
import {
  api,
  detailsOf,
  httpStep,
  httpTarget,
  oneStepWorkflow,
  register,
  riskyStep,
  start,
  uniqueId,
  waitForRun,
} from "./helpers.ts";

/**
 * `GET /v1/gates`: the open gates of every run ("waiting for me"), read from
 * the runs the run index names as having open gates. The index follows its
 * runs by a moment, so each test waits for the listing to catch up.
 */

/** A human step that asks for `{ ok }`. */
const askStep = (prompt: string) => ({
  ref: "ask",
  action: {
    kind: "human",
    implementation: {
      prompt_template: prompt,
      input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
    },
  },
});

async function listGates(query = ""): Promise<OpenGateList> {
  const response = await api("GET", `/v1/gates${query}`);
  if (response.status !== 200) {
    throw new Error(`GET /v1/gates${query}: ${response.status} ${JSON.stringify(response.json)}`);
  }
  return OpenGateList.parse(response.json);
}

/** Every open gate of `runIds`, across every page of `limit` runs. */
async function allPages(runIds: readonly string[], limit: number): Promise<OpenGateList["gates"]> {
  const gates: OpenGateList["gates"] = [];
  let cursor: string | null = null;
  do {
    const query: string = `?status=open&limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`;
    const page = await listGates(query);
    gates.push(...page.gates.filter((gate) => runIds.includes(gate.run_id)));
    cursor = page.next_cursor;
  } while (cursor !== null);
  return gates;
}

/** Waits until the listing's gates of `runIds` are `expected` (as `gate_id@run_id`, in listing order). */
async function untilListed(runIds: readonly string[], expected: string[], limit = 50): Promise<void> {
  let seen: string[] = [];
  await vi
    .waitUntil(
      async () => {
        seen = (await allPages(runIds, limit)).map((gate) => `${gate.gate_id}@${gate.run_id}`);
        return JSON.stringify(seen) === JSON.stringify(expected);
      },
      { timeout: 15_000, interval: 50 },
    )
    .catch(() => {
      throw new Error(`listed ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`);
    });
}

describe("GET /v1/gates lists the open gates across runs", () => {
  it("lists input and approval gates with their runs, newest run first, and drops a gate once answered", async ({
    expect,
  }) => {
    const input = { id: uniqueId("asks"), nodes: { main: { task: { steps: [askStep("Ship it?")] } } } };
    const approval = oneStepWorkflow(uniqueId("risky"), "deploy", riskyStep(uniqueId("mark")));
    const plain = oneStepWorkflow(uniqueId("plain"), "call", httpStep("call", `${httpTarget()}/mark/x`));
    await register({ workflows: [input, approval, plain] });
    const asking = await start(input.id);
    const risky = await start(approval.id);
    const plainRun = await start(plain.id);
    await waitForRun(plainRun);
    const runs = [asking, risky, plainRun];
    await untilListed(runs, [`gate_1@${risky}`, `gate_1@${asking}`]);

    const [riskyGate, askingGate] = await allPages(runs, 50);
    expect(riskyGate).toMatchObject({
      run_id: risky,
      workflow: { id: approval.id, version: 1 },
      run_status: "waiting",
      kind: "approval",
      node: "deploy",
      step: "deploy",
      status: "open",
    });
    expect(askingGate).toMatchObject({ run_id: asking, kind: "input", prompt: "Ship it?", status: "open" });

    const answered = await api("POST", `/v1/runs/${asking}/gates/gate_1`, { response: { ok: true } });
    expect(answered.status).toBe(200);
    await untilListed(runs, [`gate_1@${risky}`]);
  });

  it("lists a gate that opened while another node of its run still runs (the run is running, not waiting)", async ({
    expect,
  }) => {
    const workflow = {
      id: uniqueId("busy"),
      nodes: {
        ask: { task: { steps: [askStep("Go on?")] } },
        slow: { task: { steps: [httpStep("wait", `${httpTarget()}/slow?ms=3000`)] } },
      },
    };
    await register({ workflows: [workflow] });
    const runId = await start(workflow.id);
    await untilListed([runId], [`gate_1@${runId}`]);
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("running");
  });

  it("pages by runs with an opaque cursor: every open gate exactly once", async ({ expect }) => {
    const workflow = { id: uniqueId("pages"), nodes: { main: { task: { steps: [askStep("Page?")] } } } };
    await register({ workflows: [workflow] });
    const runIds: string[] = [];
    for (let index = 0; index < 5; index += 1) {
      runIds.push(await start(workflow.id));
    }
    const newestFirst = [...runIds].reverse().map((runId) => `gate_1@${runId}`);
    await untilListed(runIds, newestFirst);
    const paged = (await allPages(runIds, 2)).map((gate) => `gate_1@${gate.run_id}`);
    expect(paged).toEqual(newestFirst);
  });

  it("refuses a status other than open, a limit out of range and an unknown parameter, with their paths", async ({
    expect,
  }) => {
    const cases: [string, string][] = [
      ["?status=answered", "status"],
      ["?limit=51", "limit"],
      ["?limit=0", "limit"],
    ];
    for (const [query, path] of cases) {
      const response = await api("GET", `/v1/gates${query}`);
      expect(response.status, query).toBe(400);
      expect(response.json.error.code, query).toBe("request.invalid_query");
      expect(
        detailsOf(response.json).map((detail) => detail.path),
        query,
      ).toContain(path);
    }
    const unknown = await api("GET", "/v1/gates?who=me");
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toMatch(/who/);
    const cursor = await api("GET", "/v1/gates?cursor=not-a-cursor");
    expect(cursor.status).toBe(400);
    expect(cursor.json.error.code).toBe("request.invalid_cursor");
    expect((await api("GET", "/v1/gates", undefined, null)).status).toBe(401);
  });
});
