import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { SYSTEM_CLOCK } from "../../executor/invoke.ts";
import { isOneCallTask, type LimitPort } from "../../executor/limits.ts";
import { runTask } from "../../executor/run-task.ts";
import { limitObject, type LimitKeeperApi } from "../../limits/route.ts";
import { unwrap, type Result } from "../../lib/result.ts";
import type { AcquireAnswer, AcquireRequest, LimitConfig, ReleaseRequest, RenewRequest } from "../../schemas/limits.ts";
import type { AgentState } from "../../schemas/agent.ts";
import type { ResolvedAction, ResolvedStep, TaskPayload, TaskResult } from "../../schemas/index.ts";
import { httpTarget, llmServer, uniqueId } from "./helpers.ts";

/**
 * The executor's side of limits, driven through `runTask` against the real
 * HTTP target and LLM server, with a fake limit object port that records
 * every call and answers as a test tells it: a step's calls acquire, renew
 * and release (docs/architecture.md, "Limits").
 */

type Op =
  | { op: "acquire"; object: string; request: AcquireRequest; at: number }
  | { op: "release"; object: string; request: ReleaseRequest; at: number }
  | { op: "renew"; object: string; request: RenewRequest; at: number };

/** A fake limit object per (limit, key): grants unless told to refuse or to fail. */
class FakeLimits {
  readonly ops: Op[] = [];
  /** Objects (`<limit>/<key>`) that answer no room, with the time they expect room. */
  readonly refusing = new Map<string, number | null>();
  /** Objects that cannot be reached. */
  readonly unreachable = new Set<string>();
  /** Objects that refuse only their first n acquisitions. */
  readonly refuseFirst = new Map<string, number>();

  readonly port: LimitPort = (limitId, key) => this.object(`${limitId}/${key}`);

  private object(name: string): LimitKeeperApi {
    const reach = () => {
      if (this.unreachable.has(name)) {
        throw new Error("Network connection lost.");
      }
    };
    return {
      acquire: async (request): Promise<Result<AcquireAnswer>> => {
        reach();
        this.ops.push({ op: "acquire", object: name, request, at: Date.now() });
        const first = this.refuseFirst.get(name) ?? 0;
        if (first > 0) {
          this.refuseFirst.set(name, first - 1);
          return { ok: true, value: { granted: false, position: 0, retry_at: Date.now() + 30 } };
        }
        if (this.refusing.has(name)) {
          return { ok: true, value: { granted: false, position: 0, retry_at: this.refusing.get(name) ?? null } };
        }
        return {
          ok: true,
          value: { granted: true, lease_until: request.lease_ms === null ? null : Date.now() + request.lease_ms },
        };
      },
      release: async (request) => {
        reach();
        this.ops.push({ op: "release", object: name, request, at: Date.now() });
        return { ok: true, value: { released: true } };
      },
      renew: async (request) => {
        reach();
        this.ops.push({ op: "renew", object: name, request, at: Date.now() });
        return { ok: true, value: { held: request.holder_ids } };
      },
      withdraw: async () => ({ ok: true, value: { released: 0, withdrawn: 0 } }),
      status: async () => ({ ok: false, error: { code: "fake.no_status", message: "no status", retryable: false } }),
    };
  }

  /** Each call as `<op> <object> <holder>`. */
  log(): string[] {
    return this.ops.map((op) =>
      op.op === "renew"
        ? `renew ${op.object} ${op.request.holder_ids.join(",")}`
        : `${op.op} ${op.object} ${op.op === "acquire" ? op.request.holder.id : op.request.holder_id}`,
    );
  }

  releases(): ReleaseRequest[] {
    return this.ops.flatMap((op) => (op.op === "release" ? [op.request] : []));
  }
}

function limit(id: string, extra: Partial<LimitConfig> = {}): LimitConfig {
  return { id, version: 1, concurrency: 2, ...extra };
}

const NO_RETRY = { max_attempts: 1 };

function httpStep(ref: string, url: string, action: Partial<ResolvedAction> = {}): ResolvedStep {
  const http = {
    id: `t/${ref}`,
    version: 0,
    kind: "http",
    implementation: { method: "GET", url_template: url },
    execution: { retry_policy: NO_RETRY },
    ...action,
  } as ResolvedAction;
  return { ref, action: http };
}

function model(id: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    version: 1,
    provider: "openai-compatible" as const,
    model_id: "local-echo",
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
    ...extra,
  };
}

function llmStep(ref: string, question: string, implementation: Record<string, unknown> = {}): ResolvedStep {
  const action = {
    id: `t/${ref}`,
    version: 0,
    kind: "llm",
    implementation: {
      prompt: { id: "p", version: 1, messages: [{ role: "user", template: question }] },
      model: model("primary"),
      ...implementation,
    },
    execution: { retry_policy: NO_RETRY },
  } as ResolvedAction;
  return { ref, action };
}

function payload(steps: ResolvedStep[], extra: Partial<TaskPayload> = {}): TaskPayload {
  return {
    token_id: "run_lim.1",
    workflow_run_id: "run_lim",
    workflow_id: "wf",
    workflow_version: 1,
    node_id: "n",
    item_index: null,
    iteration: 1,
    task_id: "t",
    task_version: 0,
    task: { id: "t", version: 0, steps },
    input: { tenant: "acme" },
    resources: {},
    timeout_ms: 30_000,
    retry_attempt: 0,
    tools: [],
    ...extra,
  };
}

async function run(task: TaskPayload, limits: FakeLimits, vars: Partial<Env> = {}): Promise<TaskResult> {
  return runTask(task, {
    context: { env: { ...env, ...vars }, fetch: (input, init) => fetch(input, init), limits: limits.port },
    clock: SYSTEM_CLOCK,
  });
}

async function hits(key: string): Promise<number> {
  return ((await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number }).count;
}

const HOLDER = "step:run_lim/n/-/1/0/call";

describe("a step whose action names limits", () => {
  it("acquires each in order, without queueing, before its call, and releases each after it", async ({ expect }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const [a, b] = [limit("per-tenant"), limit("global", { rate: { limit: 5, period_ms: 1000 } })];
    const step = httpStep("call", `${httpTarget()}/mark/${key}`, {
      limits: [{ limit: a, key: "input.tenant" }, { limit: b }],
    });
    let hitsAtAcquire = -1;
    const acquire = limits.port;
    const port: LimitPort = (id, k) => {
      const object = acquire(id, k);
      return {
        ...object,
        acquire: async (request) => {
          hitsAtAcquire = await hits(key);
          return object.acquire(request);
        },
      };
    };
    const result = await runTask(payload([step], { priority: 7 }), {
      context: { env, fetch: (input, init) => fetch(input, init), limits: port },
      clock: SYSTEM_CLOCK,
    });
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    expect(hitsAtAcquire).toBe(0);
    expect(await hits(key)).toBe(1);
    expect(limits.log().slice(0, 2)).toEqual([`acquire per-tenant/acme ${HOLDER}/1`, `acquire global/ ${HOLDER}/1`]);
    expect(limits.log().slice(2).sort()).toEqual([
      `release global/ ${HOLDER}/1`,
      `release per-tenant/acme ${HOLDER}/1`,
    ]);
    const first = limits.ops[0];
    expect(first?.op === "acquire" && first.request).toEqual({
      config: a,
      key: "acme",
      holder: { id: `${HOLDER}/1`, run_id: "run_lim", priority: 7 },
      lease_ms: 30_000,
      queue: false,
    });
    // No tokens and no pause: an http call that answered.
    expect(limits.releases()).toEqual([{ holder_id: `${HOLDER}/1` }, { holder_id: `${HOLDER}/1` }]);
  });

  it("never calls a limit object for a step without limits", async ({ expect }) => {
    const limits = new FakeLimits();
    limits.unreachable.add("anything/");
    const result = await run(
      payload([
        httpStep("call", `${httpTarget()}/json?a=1`),
        llmStep("ask", "Say hi"),
        { ref: "ctx", action: { id: "c", version: 0, kind: "context", implementation: { updates: [] } } },
      ]),
      limits,
    );
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    expect(limits.ops).toEqual([]);
  });

  it("releases after a failed call too, and each attempt of a retry acquires as its own call", async ({ expect }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/flaky/${key}?fail=1&status=503`, {
      limits: [{ limit: limit("one") }],
      execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 1, jitter: false } },
    });
    const result = await run(payload([step]), limits);
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    expect(limits.log()).toEqual([
      `acquire one/ ${HOLDER}/1`,
      `release one/ ${HOLDER}/1`,
      `acquire one/ ${HOLDER}/2`,
      `release one/ ${HOLDER}/2`,
    ]);
  });

  it("passes a 429's Retry-After (seconds or a date, at most a day) to the release, and nothing for a 503's", async ({
    expect,
  }) => {
    const cases: Array<[string, (ms: number | undefined) => boolean]> = [
      ["/status/429?retry_after=7", (ms) => ms === 7_000],
      [
        `/status/429?retry_after=${encodeURIComponent(new Date(Date.now() + 60_000).toUTCString())}`,
        (ms) => ms !== undefined && ms > 55_000 && ms <= 60_000,
      ],
      ["/status/429?retry_after=100000000", (ms) => ms === 86_400_000],
      ["/status/429", (ms) => ms === undefined],
      ["/status/503?retry_after=7", (ms) => ms === undefined],
      ["/status/404", (ms) => ms === undefined],
    ];
    for (const [path, check] of cases) {
      const limits = new FakeLimits();
      const step = httpStep("call", `${httpTarget()}${path}`, { limits: [{ limit: limit("api") }] });
      const result = await run(payload([step]), limits);
      expect(result.success).toBe(false);
      const [release, ...more] = limits.releases();
      expect(more).toEqual([]);
      expect(check(release?.retry_after_ms), `${path}: ${JSON.stringify(release)}`).toBe(true);
    }
  });

  it("fails the step, not retryable, when a limit's key cannot be computed, and asks no object", async ({ expect }) => {
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/json`, { limits: [{ limit: limit("api"), key: "input" }] });
    const result = await run(payload([step]), limits);
    expect(result.error).toMatchObject({ code: "limit.invalid_key", retryable: false, step: "call" });
    expect(limits.ops).toEqual([]);
  });

  it("fails the attempt retryably with limit.unavailable when an object cannot be reached, and makes no call", async ({
    expect,
  }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    limits.unreachable.add("down/");
    const step = httpStep("call", `${httpTarget()}/mark/${key}`, {
      limits: [{ limit: limit("up") }, { limit: limit("down") }],
      execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 1, jitter: false } },
    });
    const result = await run(
      payload([step], { task: { id: "t", version: 0, steps: [{ ...step, on_failure: "retry" }] } }),
      limits,
    );
    expect(result.error).toMatchObject({ code: "limit.unavailable", retryable: true });
    expect(result.steps?.[0]?.attempts.map((attempt) => attempt.error?.code)).toEqual([
      "limit.unavailable",
      "limit.unavailable",
    ]);
    expect(await hits(key)).toBe(0);
    // What the attempt took is given back.
    expect(limits.log()).toEqual([
      `acquire up/ ${HOLDER}/1`,
      `release up/ ${HOLDER}/1`,
      `acquire up/ ${HOLDER}/2`,
      `release up/ ${HOLDER}/2`,
    ]);
    // An object that cannot even be reached (no binding) is no different.
    const unbound = await runTask(payload([step]), {
      context: {
        env,
        fetch: (input, init) => fetch(input, init),
        limits: () => {
          throw new TypeError("Cannot read properties of undefined (reading 'idFromName')");
        },
      },
      clock: SYSTEM_CLOCK,
    });
    expect(unbound.steps?.[0]?.attempts[0]?.error).toMatchObject({ code: "limit.unavailable", retryable: true });
    expect(await hits(key)).toBe(0);
  });
});

describe("a limit without room", () => {
  it("suspends the step with the limit, its key and the call's holder, after giving back what the call took", async ({
    expect,
  }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const busy = limit("busy");
    limits.refusing.set("busy/acme", Date.now() + 5_000);
    const step = httpStep("call", `${httpTarget()}/mark/${key}`, {
      limits: [{ limit: limit("free") }, { limit: busy, key: "input.tenant" }],
    });
    const result = await run(payload([step]), limits);
    expect(result.success).toBe(false);
    expect(result.error).toBeUndefined();
    expect(result.suspended).toEqual({
      step_ref: "call",
      step_index: 0,
      context: { input: { tenant: "acme" }, state: {}, output: {} },
      wait: { kind: "limit", limit: busy, key: "acme", holder_id: `${HOLDER}/1` },
    });
    expect(result.steps?.[0]?.status).toBe("suspended");
    expect(await hits(key)).toBe(0);
    expect(limits.log()).toEqual([
      `acquire free/ ${HOLDER}/1`,
      `acquire busy/acme ${HOLDER}/1`,
      `release free/ ${HOLDER}/1`,
    ]);
  });

  it("suspends after a retry with the holder of the attempt that found no room", async ({ expect }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/flaky/${key}?fail=5&status=503`, {
      limits: [{ limit: limit("api") }],
      execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 1, jitter: false } },
    });
    const acquire = limits.port;
    let asked = 0;
    const port: LimitPort = (id, k) => {
      const object = acquire(id, k);
      return {
        ...object,
        acquire: async (request) => {
          asked += 1;
          return asked === 2
            ? { ok: true, value: { granted: false, position: 0, retry_at: null } }
            : object.acquire(request);
        },
      };
    };
    const result = await runTask(payload([step]), {
      context: { env, fetch: (input, init) => fetch(input, init), limits: port },
      clock: SYSTEM_CLOCK,
    });
    expect(result.suspended?.wait).toMatchObject({ kind: "limit", holder_id: `${HOLDER}/2` });
    expect(await hits(key)).toBe(1);
  });

  it("on a granted resume, holds every limit of its first call as the holder the object served", async ({ expect }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/flaky/${key}?fail=1&status=503`, {
      limits: [{ limit: limit("a") }, { limit: limit("b") }],
      execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 1, jitter: false } },
    });
    const context = { input: { tenant: "acme" }, state: {}, output: {} };
    const served = `${HOLDER}/3`;
    const result = await run(
      payload([step], { resume: { mode: "granted", step_index: 0, context, holder_id: served } }),
      limits,
    );
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    expect(limits.log()).toEqual([
      `acquire a/ ${served}`,
      `acquire b/ ${served}`,
      `release a/ ${served}`,
      `release b/ ${served}`,
      `acquire a/ ${HOLDER}/2`,
      `acquire b/ ${HOLDER}/2`,
      `release a/ ${HOLDER}/2`,
      `release b/ ${HOLDER}/2`,
    ]);
  });

  it("on a granted resume of a high-risk step, runs it without asking for its approval again", async ({ expect }) => {
    const key = uniqueId("lim");
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/mark/${key}`, { risk: "high", limits: [{ limit: limit("a") }] });
    const context = { input: { tenant: "acme" }, state: {}, output: {} };
    const result = await run(
      payload([step], { resume: { mode: "granted", step_index: 0, context, holder_id: "served" } }),
      limits,
    );
    expect(result.success, JSON.stringify(result.suspended ?? result.error)).toBe(true);
    expect(await hits(key)).toBe(1);
    expect(limits.log()).toEqual(["acquire a/ served", "release a/ served"]);
  });

  it("on a granted resume whose first call finds no room elsewhere, gives back the served slot too", async ({
    expect,
  }) => {
    const limits = new FakeLimits();
    limits.refusing.set("a/", null);
    const step = httpStep("call", `${httpTarget()}/json`, { limits: [{ limit: limit("a") }, { limit: limit("b") }] });
    const context = { input: { tenant: "acme" }, state: {}, output: {} };
    const result = await run(
      payload([step], { resume: { mode: "granted", step_index: 0, context, holder_id: "served" } }),
      limits,
    );
    expect(result.suspended?.wait).toEqual({ kind: "limit", limit: limit("a"), key: "", holder_id: "served" });
    expect(limits.log().slice(0, 1)).toEqual(["acquire a/ served"]);
    expect(limits.log().slice(1).sort()).toEqual(["release a/ served", "release b/ served"]);
  });

  it("makes the same holder ids when a lost dispatch is sent again, and others for a retry of the task", async ({
    expect,
  }) => {
    const ids = async (extra: Partial<TaskPayload>) => {
      const limits = new FakeLimits();
      const step = httpStep("call", `${httpTarget()}/json`, { limits: [{ limit: limit("a") }] });
      await run(payload([step], { item_index: 4, iteration: 2, ...extra }), limits);
      return limits.log();
    };
    const first = await ids({ token_id: "run_lim.7" });
    expect(first).toEqual(["acquire a/ step:run_lim/n/4/2/0/call/1", "release a/ step:run_lim/n/4/2/0/call/1"]);
    expect(await ids({ token_id: "run_lim.9" })).toEqual(first);
    expect(await ids({ token_id: "run_lim.10", retry_attempt: 1 })).toEqual([
      "acquire a/ step:run_lim/n/4/2/1/call/1",
      "release a/ step:run_lim/n/4/2/1/call/1",
    ]);
  });

  it("in a tool call's task (which cannot wait), fails the call retryably with limit.no_room, by the retry policy", async ({
    expect,
  }) => {
    const limits = new FakeLimits();
    limits.refusing.set("a/", Date.now() + 40);
    const step = httpStep("fetch", `${httpTarget()}/json`, {
      limits: [{ limit: limit("a") }],
      execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 1, jitter: false } },
    });
    const task = {
      id: "t/agent/tools/fetch",
      version: 0,
      steps: [{ ...step, output_mapping: { "output.result": "$" } }],
    };
    const result = await run(payload([], { task_id: task.id, task, token_id: "run_lim.12", one_call: true }), limits);
    expect(result.suspended).toBeUndefined();
    const attempts = result.steps?.[0]?.attempts ?? [];
    expect(attempts.map((attempt) => attempt.error?.code)).toEqual(["limit.no_room", "limit.no_room"]);
    expect(attempts[0]?.error?.retryable).toBe(true);
    // The retry came no sooner than the limit expected room.
    expect(attempts[0]?.retry_reason).toBe("retry_after");
    expect(limits.log()).toEqual(["acquire a/ call:run_lim.12/1", "acquire a/ call:run_lim.12/2"]);
  });
});

describe("tasks that cannot wait", () => {
  it("are those the coordinator marks one_call (an agent's tool call, an undo), never a task of a definition", ({
    expect,
  }) => {
    expect(isOneCallTask({ one_call: true })).toBe(true);
    expect(isOneCallTask({})).toBe(false);
  });
});

describe("renewals", () => {
  it("renew the call's leases every third of a lease while it runs, and stop before its release", async ({
    expect,
  }) => {
    const limits = new FakeLimits();
    const step = httpStep("call", `${httpTarget()}/slow?ms=400`, { limits: [{ limit: limit("a") }] });
    const result = await run(payload([step]), limits, { LIMIT_LEASE_MS: "150" });
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    const renews = limits.ops.filter((op) => op.op === "renew");
    // 400 ms at one renewal per 50 ms: about 8 (fewer on a loaded machine, never none).
    expect(renews.length).toBeGreaterThanOrEqual(3);
    expect(renews.every((op) => op.op === "renew" && op.request.lease_ms === 150)).toBe(true);
    expect(new Set(renews.map((op) => op.op === "renew" && op.request.holder_ids.join()))).toEqual(
      new Set([`${HOLDER}/1`]),
    );
    const release = limits.ops.findIndex((op) => op.op === "release");
    expect(release).toBe(limits.ops.length - 1);
    expect(limits.ops[0]?.op === "acquire" && limits.ops[0].request.lease_ms).toBe(150);
    // No timer outlives the call.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(limits.ops.filter((op) => op.op === "renew").length).toBe(renews.length);
  });
});

describe("a step whose model names limits", () => {
  it("releases with the tokens the call reported, and a 429's Retry-After", async ({ expect }) => {
    const limits = new FakeLimits();
    const limited = model("primary", {
      limits: [{ limit: limit("model-tpm", { tokens: { limit: 1000, period_ms: 60_000 } }) }],
    });
    const step = llmStep("ask", "Summarise the tides", { model: limited });
    const result = await run(payload([step]), limits);
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    const tokens = result.steps?.[0]?.attempts[0]?.call?.tokens as { input: number; output: number };
    expect(tokens.input + tokens.output).toBeGreaterThan(0);
    expect(limits.releases()).toEqual([
      { holder_id: `${HOLDER.replace("call", "ask")}/1`, tokens: tokens.input + tokens.output },
    ]);

    const throttled = new FakeLimits();
    const failing = llmStep("ask", "Summarise [[fail:429]][[retry-after:3]]", { model: limited });
    const failed = await run(payload([failing]), throttled);
    expect(failed.error).toMatchObject({ code: "llm.status" });
    expect(throttled.releases()).toEqual([{ holder_id: `${HOLDER.replace("call", "ask")}/1`, retry_after_ms: 3_000 }]);
  });

  it("counts a model without room as unavailable: the next fallback is called, holding its own limits", async ({
    expect,
  }) => {
    const limits = new FakeLimits();
    limits.refusing.set("first/", null);
    const primary = model("primary", { limits: [{ limit: limit("first") }] });
    const backup = model("backup", { limits: [{ limit: limit("second") }] });
    const step = llmStep("ask", "Say hi", { model: primary, fallback_models: [backup] });
    const result = await run(payload([step]), limits);
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    const ask = HOLDER.replace("call", "ask");
    expect(limits.log()).toEqual([`acquire first/ ${ask}/1`, `acquire second/ ${ask}/2`, `release second/ ${ask}/2`]);
    expect(result.steps?.[0]?.attempts.map((attempt) => [attempt.error?.code, attempt.retry_reason])).toEqual([
      ["limit.no_room", "fallback"],
      [undefined, undefined],
    ]);
  });

  it("reports what the calls before the wait spent: a repair refused after an answer that did not match", async ({
    expect,
  }) => {
    const limits = new FakeLimits();
    const acquire = limits.port;
    let asked = 0;
    const port: LimitPort = (id, k) => {
      const object = acquire(id, k);
      return {
        ...object,
        acquire: async (request) => {
          asked += 1;
          return asked === 2
            ? { ok: true, value: { granted: false, position: 0, retry_at: null } }
            : object.acquire(request);
        },
      };
    };
    const primary = model("primary", { limits: [{ limit: limit("first") }] });
    const step = llmStep("ask", "Say hi [[invalid-json]]", { model: primary });
    const produces = { type: "object", required: ["greeting"], properties: { greeting: { type: "string" } } };
    const action = step.action as Extract<ResolvedAction, { kind: "llm" }>;
    const withSchema = {
      ...step,
      action: {
        ...action,
        implementation: { ...action.implementation, prompt: { ...action.implementation.prompt, produces } },
      },
    } as ResolvedStep;
    const result = await runTask(payload([withSchema]), {
      context: { env, fetch: (input, init) => fetch(input, init), limits: port },
      clock: SYSTEM_CLOCK,
    });
    expect(result.suspended?.wait).toMatchObject({ kind: "limit", holder_id: `${HOLDER.replace("call", "ask")}/2` });
    const tokens = result.steps?.[0]?.attempts[0]?.call?.tokens as { input: number; output: number };
    expect(result.metrics.llm_tokens).toMatchObject(tokens);
    expect(tokens.input).toBeGreaterThan(0);
  });

  it("suspends on the first model's limit when no model has room", async ({ expect }) => {
    const limits = new FakeLimits();
    limits.refusing.set("first/", null);
    limits.refusing.set("second/", null);
    const primary = model("primary", { limits: [{ limit: limit("first") }] });
    const backup = model("backup", { limits: [{ limit: limit("second") }] });
    const step = llmStep("ask", "Say hi", { model: primary, fallback_models: [backup] });
    const result = await run(payload([step]), limits);
    const ask = HOLDER.replace("call", "ask");
    expect(result.suspended?.wait).toEqual({ kind: "limit", limit: limit("first"), key: "", holder_id: `${ask}/1` });
  });
});

describe("an agent step whose model names limits", () => {
  const tool = {
    name: "lookup",
    input_schema: { type: "object" },
    action: { id: "lookup", version: 1, kind: "context", implementation: { updates: [] } },
  };
  const state: AgentState = {
    turns: [
      {
        model: "primary",
        tokens: { input: 3, output: 2 },
        cost_usd: 0,
        finish_reason: "tool-calls",
        calls: [{ id: "c1", name: "lookup", input: {}, output: { found: true } }],
      },
    ],
    usage: { tokens: { input: 3, output: 2 }, cost_usd: 0 },
  };
  const agentStep = (): ResolvedStep => ({
    ...llmStep("agent", "Answer", { model: model("primary", { limits: [{ limit: limit("m") }] }), tools: [tool] }),
    output_mapping: { "output.turns": "$.turns" },
  });

  it("holds the limits around each turn's model call, numbered by turn", async ({ expect }) => {
    const limits = new FakeLimits();
    const context = { input: {}, state: {}, output: {} };
    const result = await run(
      payload([agentStep()], { resume: { mode: "tools", step_index: 0, context, agent: state } }),
      limits,
    );
    expect(result.success, JSON.stringify(result.error)).toBe(true);
    const agent = HOLDER.replace("call", "agent");
    expect(limits.log()).toEqual([`acquire m/ ${agent}/2.1`, `release m/ ${agent}/2.1`]);
  });

  it("waits with its loop when a later turn finds no room, and goes on with it once granted", async ({ expect }) => {
    const limits = new FakeLimits();
    limits.refusing.set("m/", null);
    const context = { input: {}, state: {}, output: {} };
    const waited = await run(
      payload([agentStep()], { resume: { mode: "tools", step_index: 0, context, agent: state } }),
      limits,
    );
    const agent = HOLDER.replace("call", "agent");
    expect(waited.suspended?.wait).toEqual({
      kind: "limit",
      limit: limit("m"),
      key: "",
      holder_id: `${agent}/2.1`,
      agent: state,
    });

    limits.refusing.clear();
    const resumed = await run(
      payload([agentStep()], {
        resume: { mode: "granted", step_index: 0, context, holder_id: `${agent}/2.1`, agent: state },
      }),
      limits,
    );
    expect(resumed.success, JSON.stringify(resumed.error)).toBe(true);
    // The loop went on: the answer counts the turn before the wait.
    expect(resumed.output).toEqual({ turns: 2 });
    expect(limits.log().slice(-2)).toEqual([`acquire m/ ${agent}/2.1`, `release m/ ${agent}/2.1`]);
  });
});

describe("with the real limit object", () => {
  it("holds a slot for the call and gives it back with the tokens; a slot someone else holds makes the step wait", async ({
    expect,
  }) => {
    const id = uniqueId("lim");
    const config = limit(id, { concurrency: 1, tokens: { limit: 1_000_000, period_ms: 60_000 } });
    const primary = model("primary", { limits: [{ limit: config, key: "input.tenant" }] });
    const step = llmStep("ask", "Summarise the tides", { model: primary });
    const done = await runTask(payload([step], { workflow_run_id: `run_${id}` }), {
      context: { env, fetch: (input, init) => fetch(input, init) },
      clock: SYSTEM_CLOCK,
    });
    expect(done.success, JSON.stringify(done.error)).toBe(true);
    const object = limitObject(env, id, "acme");
    const after = unwrap(await object.status(id, "acme"));
    const tokens = done.steps?.[0]?.attempts[0]?.call?.tokens as { input: number; output: number };
    expect(after).toMatchObject({ in_use: 0, waiting: 0, window: { used: tokens.input + tokens.output } });

    const holder = { id: "someone-else", run_id: "run_other", priority: 5 };
    const taken = unwrap(await object.acquire({ config, key: "acme", holder, lease_ms: 60_000, queue: false }));
    expect(taken.granted).toBe(true);
    const waiting = await runTask(payload([step], { workflow_run_id: `run_${id}` }), {
      context: { env, fetch: (input, init) => fetch(input, init) },
      clock: SYSTEM_CLOCK,
    });
    expect(waiting.suspended?.wait).toMatchObject({
      kind: "limit",
      key: "acme",
      holder_id: `step:run_${id}/n/-/1/0/ask/1`,
    });
    expect(unwrap(await object.status(id, "acme"))).toMatchObject({ in_use: 1, waiting: 0 });
  });
});
