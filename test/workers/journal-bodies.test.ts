import { describe, it, vi } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import { NOTHING_LIVE, toLiveWork } from "../../coordinator/live.ts";
import {
  decide,
  DEADLINE_GRACE_MS,
  DEFAULT_TASK_TIMEOUT_MS,
  type Decision,
  type RunEvent,
  type RunState,
} from "../../coordinator/decide.ts";
import { RunSnapshot } from "../../schemas/index.ts";
import { isJournalKind, JOURNAL_KINDS, parseJournalBody } from "../../schemas/journal-bodies.ts";
import {
  riskyStep,
  api,
  uniqueId,
  waitForRun,
  httpTarget,
  llmServer,
  register,
  start,
  journal,
  gateOpenOrSettled,
  postLlmScript,
} from "./helpers.ts";

/**
 * Real runs write only the journal the schema table describes: every entry's
 * kind is a row of JOURNAL_BODIES and its body parses with that row's schema,
 * in runs that open and answer gates, expire them, retry, fan out, skip,
 * repeat, start children, fail, are redriven and cancelled.
 */

/** Each entry that breaks the table: its kind is unknown, or its body does not parse. */
function offTable(entries: readonly { seq: number; kind: string; body: unknown }[]): string[] {
  return entries.flatMap((entry) => {
    if (!isJournalKind(entry.kind)) {
      return [`seq ${entry.seq}: unknown kind ${entry.kind}`];
    }
    const parsed = parseJournalBody(entry.kind, entry.body as Record<string, unknown>);
    return parsed.success ? [] : [`seq ${entry.seq} ${entry.kind}: ${parsed.error.message}`];
  });
}

const contextStep = (ref: string, path: string, expr: string) => ({
  ref,
  action: { kind: "context", implementation: { updates: [{ path, expr }] } },
  output_mapping: { [`output.${path}`]: `$.${path}` },
});
const humanStep = (ref: string, extra: Record<string, unknown> = {}) => ({
  ref,
  action: {
    kind: "human",
    implementation: {
      prompt_template: "Go on?",
      input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
      ...extra,
    },
  },
  output_mapping: { "output.answer": "$.response" },
});

describe("the journal of real runs", () => {
  it("holds only kinds of the schema table, each body parsing with its kind's schema", async ({ expect }) => {
    const child = uniqueId("child");
    const parent = uniqueId("parent");
    const expiring = uniqueId("expiring");
    const risky = uniqueId("risky");
    const gated = uniqueId("gated");
    const waiter = uniqueId("waiter");
    const napper = uniqueId("napper");
    const listener = uniqueId("listener");
    const agent = uniqueId("agent");
    const key = uniqueId("flaky");
    const scripts = { done: uniqueId("script"), stuck: uniqueId("script") };
    await postLlmScript(scripts.done, [
      {
        tool_calls: [
          { name: "fine", input: {} },
          { name: "broken", input: {} },
          { name: "nothing", input: {} },
        ],
      },
      { text: "one worked" },
    ]);
    await postLlmScript(scripts.stuck, [{ tool_calls: [{ name: "slow", input: {} }] }]);
    const httpTool = (name: string, url: string) => ({
      name,
      action: { kind: "http", implementation: { method: "GET", url_template: url } },
    });
    await register({
      models: [
        {
          id: agent,
          provider: "openai-compatible",
          model_id: "local-echo",
          base_url: `${llmServer()}/v1`,
          api_key: "$env:LLM_API_KEY",
        },
      ],
      workflows: [
        {
          id: agent,
          nodes: {
            triage: {
              task: {
                steps: [
                  {
                    ref: "agent",
                    action: {
                      kind: "llm",
                      implementation: {
                        prompt: { messages: [{ role: "user", template: "Go [[script:{{script}}]]" }] },
                        model: agent,
                        tools: [
                          httpTool("fine", `${httpTarget()}/json?ok=1`),
                          httpTool("broken", `${httpTarget()}/status/404`),
                          httpTool("slow", `${httpTarget()}/slow/${key}-slow?ms=20000`),
                        ],
                      },
                    },
                  },
                ],
              },
            },
          },
        },
        { id: child, nodes: { double: { task: { steps: [contextStep("x2", "n", "input.n * 2")] } } } },
        {
          id: parent,
          nodes: {
            ask: { task: { steps: [humanStep("ask")] } },
            each: {
              depends_on: ["ask"],
              foreach: { items: "$.input.items" },
              when: "item != 2",
              input_mapping: { n: "$.item" },
              task: { steps: [contextStep("sq", "n", "input.n * input.n")] },
            },
            flaky: {
              task: {
                steps: [
                  {
                    ref: "call",
                    action: {
                      kind: "http",
                      implementation: { method: "GET", url_template: `${httpTarget()}/flaky/${key}?fail=1` },
                    },
                    on_failure: "retry",
                  },
                ],
              },
              retry: { max_attempts: 2, initial_delay_ms: 10 },
            },
            sub: { workflow: child, input_mapping: { n: "$.input.n" } },
            chosen: { workflow: { from: "$.input.flow", allowed: [child] }, input_mapping: { n: "$.input.n" } },
            step_child: {
              task: {
                steps: [
                  {
                    ref: "call",
                    action: { kind: "workflow", implementation: { workflow: child, on_failure: "propagate" } },
                    input_mapping: { n: "$.input.n" },
                  },
                ],
              },
            },
            never: { when: "false", task: { steps: [contextStep("x", "x", "1")] } },
            after_never: { depends_on: ["never"], task: { steps: [contextStep("y", "y", "1")] } },
            loop: {
              task: { steps: [contextStep("z", "z", "1")] },
              repeat: { until: "size(state) > 100", max_iterations: 2 },
              on_failure: "continue",
            },
          },
        },
        {
          id: expiring,
          nodes: {
            defaulted: {
              task: { steps: [humanStep("ask", { timeout_ms: 100, on_timeout: { default: { ok: true } } })] },
            },
            failing: { task: { steps: [humanStep("ask", { timeout_ms: 100, on_timeout: "fail" })] } },
            // Its undo fails once (retryably) and then runs when the run compensates.
            made: {
              task: {
                steps: [
                  {
                    ref: "make",
                    action: {
                      kind: "http",
                      implementation: { method: "GET", url_template: `${httpTarget()}/json?id=1` },
                      undo: {
                        action: {
                          kind: "http",
                          implementation: { method: "GET", url_template: `${httpTarget()}/flaky/${key}-undo?fail=1` },
                          execution: { retry_policy: { max_attempts: 1 } },
                        },
                        retry: { max_attempts: 2, initial_delay_ms: 10 },
                      },
                    },
                  },
                ],
              },
            },
          },
        },
        { id: risky, nodes: { only: { task: { steps: [riskyStep(uniqueId("deploy"))] } } } },
        { id: gated, nodes: { ask: { task: { steps: [humanStep("ask")] } } } },
        { id: waiter, nodes: { sub: { workflow: gated } } },
        {
          id: listener,
          nodes: {
            listen: {
              task: {
                steps: [
                  {
                    ref: "ping",
                    input_mapping: { padding: { path: "$.input.padding", optional: true } },
                    action: {
                      kind: "event",
                      implementation: {
                        name: "ping",
                        match: "size(input) >= 0 && event.data != 0",
                        timeout_ms: 1_000,
                        on_timeout: { default: null },
                      },
                    },
                  },
                ],
              },
            },
          },
        },
        {
          id: napper,
          nodes: {
            nap: {
              task: {
                steps: [
                  {
                    ref: "nap",
                    action: { kind: "sleep", implementation: {} },
                    input_mapping: { duration_ms: "$.input.ms" },
                  },
                ],
              },
            },
          },
        },
      ],
    });

    const runs: string[] = [];
    // A gate linked and answered, a foreach with a skipped item, a retry, two children, skips, a repeat that gives up.
    const parentRun = await start(parent, { input: { items: [1, 2, 3], n: 4, flow: child } });
    runs.push(parentRun);
    const waiting = await waitForRun(parentRun, gateOpenOrSettled);
    const link = await api("POST", `/v1/runs/${parentRun}/gates/${waiting.gates[0].gate_id}/links`, {
      approver: "ops@example.com",
    });
    expect(link.status).toBe(201);
    await api("POST", `/v1/runs/${parentRun}/gates/${waiting.gates[0].gate_id}`, { response: { ok: true } });
    expect((await waitForRun(parentRun)).status).toBe("completed");
    // Erased once it ended: its bodies still parse, with their values erased, and its journal ends in `erased`.
    expect((await api("POST", `/v1/runs/${parentRun}/erase`, { reason: "a subject's request" })).status).toBe(200);

    // Gates that expire: with the default answer, and failing the run, which then compensates.
    const expiringRun = await start(expiring);
    runs.push(expiringRun);
    const expired = await waitForRun(expiringRun, (run) => run.compensation?.status === "completed", 10_000);
    expect(expired.status).toBe("failed");

    // An approval rejected, the failed run redriven, approved, then one more run cancelled at its gate.
    const riskyRun = await start(risky);
    runs.push(riskyRun);
    const approval = await waitForRun(riskyRun, gateOpenOrSettled);
    await api("POST", `/v1/runs/${riskyRun}/gates/${approval.gates[0].gate_id}`, {
      response: { approved: false, reason: "not now" },
    });
    expect((await waitForRun(riskyRun)).status).toBe("failed");
    expect((await api("POST", `/v1/runs/${riskyRun}/redrive`)).status).toBe(200);
    const again = await waitForRun(riskyRun, (run) => run.gates?.some((gate: any) => gate.status === "open"));
    const reopened = again.gates.find((gate: any) => gate.status === "open");
    await api("POST", `/v1/runs/${riskyRun}/gates/${reopened.gate_id}`, {
      response: { approved: true },
      responder: "ops",
    });
    expect((await waitForRun(riskyRun)).status).toBe("completed");
    const cancelledRun = await start(risky);
    runs.push(cancelledRun);
    await waitForRun(cancelledRun, gateOpenOrSettled);
    expect((await api("POST", `/v1/runs/${cancelledRun}/cancel`, { reason: "changed my mind" })).status).toBe(200);

    // A run cancelled while its child waits at a gate: the child is cancelled too.
    const waiterRun = await start(waiter);
    runs.push(waiterRun);
    await vi.waitUntil(async () => (await journal(waiterRun)).some((entry) => entry.kind === "child.started"), {
      timeout: 10_000,
      interval: 20,
    });
    expect((await api("POST", `/v1/runs/${waiterRun}/cancel`, { reason: "no longer needed" })).status).toBe(200);

    // A sleep that ends, and one cancelled while it sleeps.
    const napped = await start(napper, { input: { ms: 50 } });
    const cancelledNap = await start(napper, { input: { ms: 60_000 } });
    runs.push(napped, cancelledNap);
    expect((await waitForRun(napped)).status).toBe("completed");
    await waitForRun(cancelledNap, (run) => run.status === "waiting");
    expect((await api("POST", `/v1/runs/${cancelledNap}/cancel`, { reason: "woken early" })).status).toBe(200);

    // Event waits: one takes a signal, one times out with its default, one is cancelled.
    const listening = async () => {
      const runId = await start(listener);
      runs.push(runId);
      await waitForRun(runId, (run) => run.waiting_for?.length > 0);
      return runId;
    };
    const [signalled, timedOut, abandoned] = [await listening(), await listening(), await listening()];
    // An event the hub cannot filter (the wait's input is too large to keep there) that the run declines.
    const declining = await start(listener, { input: { padding: "p".repeat(20_000) } });
    runs.push(declining);
    await waitForRun(declining, (run) => run.waiting_for?.length > 0);
    expect((await api("POST", "/v1/events", { name: "ping", data: 0 })).status).toBe(202);
    await vi.waitUntil(async () => (await journal(declining)).some((entry) => entry.kind === "event.declined"), {
      timeout: 10_000,
      interval: 20,
    });
    expect((await api("POST", `/v1/runs/${signalled}/signals`, { name: "ping", data: 1 })).status).toBe(202);
    expect((await api("POST", `/v1/runs/${abandoned}/cancel`, {})).status).toBe(200);
    expect((await waitForRun(signalled)).status).toBe("completed");
    expect((await waitForRun(timedOut)).status).toBe("completed");

    // An agent whose tools complete, fail and are refused, and one cancelled while its tool call runs.
    const agentRun = await start(agent, { input: { script: scripts.done } });
    const stuckAgent = await start(agent, { input: { script: scripts.stuck } });
    runs.push(agentRun, stuckAgent);
    expect((await waitForRun(agentRun)).status).toBe("completed");
    await vi.waitUntil(async () => (await journal(stuckAgent)).some((entry) => entry.kind === "tool_call.dispatched"), {
      timeout: 10_000,
      interval: 20,
    });
    expect((await api("POST", `/v1/runs/${stuckAgent}/cancel`, { reason: "enough" })).status).toBe(200);

    // Limits: a step that waits for a slot and is served, one withdrawn by its run's cancel, and a run
    // queued behind its workflow's limit that is served when the holder is cancelled.
    const ids = {
      step: uniqueId("slot"),
      run: uniqueId("run-slot"),
      limited: uniqueId("limited"),
      queued: uniqueId("queued"),
    };
    const ask = { kind: "human", implementation: { prompt_template: "go?", input_schema: { type: "object" } } };
    await register({
      limits: [
        { id: ids.step, concurrency: 1 },
        { id: ids.run, concurrency: 1 },
      ],
      workflows: [
        {
          id: ids.limited,
          nodes: {
            call: {
              task: {
                steps: [
                  {
                    ref: "get",
                    action: {
                      kind: "http",
                      implementation: { method: "GET", url_template: `${httpTarget()}/slow?ms=800` },
                      limits: [{ limit: ids.step }],
                    },
                  },
                ],
              },
            },
          },
        },
        {
          id: ids.queued,
          limits: [{ limit: ids.run }],
          nodes: { ask: { task: { steps: [{ ref: "ask", action: ask }] } } },
        },
      ],
    });
    const holding = await start(ids.limited);
    await waitForRun(holding, (run) => run.nodes.call?.status === "running");
    const served = await start(ids.limited);
    const withdrawn = await start(ids.limited);
    runs.push(holding, served, withdrawn);
    await waitForRun(withdrawn, (run) => run.status === "waiting");
    expect((await api("POST", `/v1/runs/${withdrawn}/cancel`, {})).status).toBe(200);
    expect((await waitForRun(served)).status).toBe("completed");
    const first = await start(ids.queued);
    await waitForRun(first, (run) => run.status === "waiting");
    const second = await start(ids.queued);
    runs.push(first, second);
    await waitForRun(second, (run) => run.limits?.[0]?.status === "waiting");
    expect((await api("POST", `/v1/runs/${first}/cancel`, {})).status).toBe(200);
    await waitForRun(second, (run) => run.status === "waiting");
    expect((await api("POST", `/v1/runs/${second}/cancel`, {})).status).toBe(200);

    const kinds = new Set<string>();
    for (const runId of runs) {
      const entries = await journal(runId);
      for (const entry of entries) {
        kinds.add(entry.kind);
        if (entry.kind === "child.started") {
          runs.push((entry.body as { child_run_id: string }).child_run_id);
        }
      }
      expect(offTable(entries), runId).toEqual([]);
    }
    // The runs above reach every kind but a lost or timed-out task (the decisions below have those), and
    // a late result only when a cancelled task's result happens to arrive after the cancel.
    const unreached = JOURNAL_KINDS.filter((kind) => !kinds.has(kind));
    expect(unreached.filter((kind) => kind !== "task.result_ignored").sort()).toEqual(["task.lost", "task.timeout"]);
  });
});

describe("the journal of decisions real runs seldom reach", () => {
  const NOW = 1_700_000_000_000;
  const step = { ref: "set", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
  const snapshot = RunSnapshot.parse({
    workflow: { id: "wf", version: 1, definition: { id: "wf", nodes: { a: { task: { steps: [step] } } } } },
    tasks: {
      a: { id: "wf/a", version: 0, steps: [{ ...step, action: { ...step.action, id: "wf/a/set", version: 0 } }] },
    },
    workflows: {},
  });

  it("writes task.lost, task.timeout and task.result_ignored with bodies of the table", ({ expect }) => {
    let state: RunState = newRunState(
      {
        run_id: "run_x",
        snapshot,
        input: {},
        mode: "auto",
        idempotency_key: null,
        request_hash: "h",
        created_by: "rpc",
        trigger: { kind: "api" },
      },
      NOW,
    );
    const decisions: Decision[] = [];
    const send = (event: RunEvent, now = NOW): void => {
      const decision = decide(state, event, { snapshot, now, random: () => 0 });
      state = decision.state;
      decisions.push(decision);
    };
    const token = (): string => state.nodes.a?.invocations[0]?.token ?? "";
    send({ type: "start" });
    send({ type: "wake", live: NOTHING_LIVE });
    // A restart lost the dispatch; a late result of it arrives; the next dispatch overruns its deadline.
    const lost = token();
    send({ type: "wake", live: NOTHING_LIVE });
    send({ type: "wake", live: toLiveWork({ tokens: [token()] }) });
    send({
      type: "task_result",
      result: {
        token_id: lost,
        success: true,
        output: null,
        metrics: { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
      },
    });
    send({ type: "wake", live: toLiveWork({ tokens: [token()] }) }, NOW + DEFAULT_TASK_TIMEOUT_MS + DEADLINE_GRACE_MS);
    const entries = decisions.flatMap((decision) =>
      decision.commands.flatMap((command) =>
        command.kind === "journal" ? [{ seq: command.seq, kind: command.entryKind, body: command.body }] : [],
      ),
    );
    const kinds = entries.map((entry) => entry.kind);
    expect(kinds).toEqual(expect.arrayContaining(["task.lost", "task.timeout", "task.result_ignored"]));
    expect(offTable(entries)).toEqual([]);
  });
});
