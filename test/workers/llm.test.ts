import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { FAKE_BINDINGS } from "../fakes/bindings.ts";
import { TEST_SECRETS } from "../secrets.ts";
import {
  TOKEN,
  api,
  uniqueId,
  waitForRun,
  singleTaskWorkflow,
  llmServer,
  mcpServer,
  register,
  runWorkflow,
  journal,
  callOf,
  stepsOf,
  postLlmScript,
} from "./helpers.ts";

async function seen(key: string): Promise<{ count: number; credentials: string[] }> {
  return (await (await fetch(`${llmServer()}/seen/${key}`)).json()) as { count: number; credentials: string[] };
}

/** A prompt whose answer the local server builds from `produces`: strings echo the question, integers count its words. */
const SUMMARY_PROMPT = {
  messages: [
    { role: "system", template: "You summarise." },
    { role: "user", template: "Summarise {{topic}} {{marker}}" },
  ],
  produces: {
    type: "object",
    required: ["summary", "words", "mood"],
    properties: { summary: { type: "string" }, words: { type: "integer" }, mood: { enum: ["calm", "stormy"] } },
    additionalProperties: false,
  },
};

const PRICING = { input_per_mtok: 3, output_per_mtok: 15 };

/** SUMMARY_PROMPT's answer on "the tides" (5 words in, 3 out), priced with PRICING. */
const TIDES_ANSWER = {
  summary: "Summarise the tides",
  words: 3,
  mood: "calm",
  _meta: { tokens: { input: 5, output: 3 }, cost_usd: 0.00006 },
};

function compatibleModel(id: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    provider: "openai-compatible",
    model_id: "local-echo",
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
    pricing: PRICING,
    ...extra,
  };
}

/** An llm step whose output lands at `output.<ref>` of the task (so in `run.output.result.<ref>`). */
function llmStep(
  ref: string,
  prompt: unknown,
  model: unknown,
  extra: Record<string, unknown> = {},
  step: Record<string, unknown> = {},
) {
  return {
    ref,
    action: { kind: "llm", implementation: { prompt, model }, ...extra },
    output_mapping: { [`output.${ref}`]: "$" },
    ...step,
  };
}

describe("the llm action", () => {
  it("returns the object an OpenAI-compatible server answers, validated against produces, and the run shows its tokens and cost", async ({
    expect,
  }) => {
    const key = uniqueId("llm");
    const ids = { prompt: uniqueId("summary"), model: uniqueId("local"), workflow: uniqueId("wf") };
    const run = await runWorkflow(
      singleTaskWorkflow(ids.workflow, [
        llmStep(
          "answer",
          ids.prompt,
          ids.model,
          {},
          { input_mapping: { topic: "$.input.topic", marker: `[[key:${key}]]` } },
        ),
      ]),
      { topic: "the tides" },
      { prompts: [{ id: ids.prompt, ...SUMMARY_PROMPT }], models: [compatibleModel(ids.model)] },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    // Input: "You summarise." (2 words) + "Summarise the tides" (3); output: the JSON text, 3 whitespace-separated words.
    expect(run.output.result.answer).toEqual(TIDES_ANSWER);
    expect(run.usage).toEqual({ input_tokens: 5, output_tokens: 3, cost_usd: 0.00006 });
    expect((await seen(key)).credentials).toEqual([`Bearer ${TEST_SECRETS.LLM_API_KEY}`]);
    // The journal's step record says what the call did: provider, model, the messages sent, the
    // answer as the model gave it, tokens, cost, finish reason.
    const completed = (await journal(run.run_id)).find((entry) => entry.kind === "task.completed");
    const call = callOf(completed);
    expect(call).toEqual({
      provider: "openai-compatible",
      model: "local-echo",
      messages: [
        { role: "system", content: "You summarise." },
        { role: "user", content: `Summarise the tides [[key:${key}]]` },
      ],
      answer: expect.any(String),
      tokens: { input: 5, output: 3 },
      cost_usd: 0.00006,
      finish_reason: expect.any(String),
    });
    const { _meta: _tides, ...answered } = TIDES_ANSWER;
    expect(JSON.parse(String(call?.answer))).toEqual(answered);
    // The run view shows the step's tokens and cost beside its status.
    expect(run.nodes.main.invocations[0].steps).toEqual([
      {
        step: "answer",
        status: "completed",
        attempts: 1,
        duration_ms: expect.any(Number),
        tokens: { input: 5, output: 3 },
        cost_usd: 0.00006,
      },
    ]);
  });

  it("returns { content } with token usage when the prompt has no produces", async ({ expect }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep(
          "chat",
          { messages: [{ role: "user", template: "Hello {{name}}" }] },
          compatibleModel("inline", { pricing: undefined }),
          {},
          { input_mapping: { name: "$.input.name" } },
        ),
      ]),
      { name: "Ada" },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.chat).toEqual({
      content: "Echo: Hello Ada",
      _meta: { tokens: { input: 2, output: 3 }, cost_usd: 0 },
    });
  });

  it("fails the step with llm.invalid_output quoting the model's text when the answer is not JSON after its one repair, without retrying", async ({
    expect,
  }) => {
    const key = uniqueId("bad");
    const retry = { execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10 } } };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("ask", SUMMARY_PROMPT, compatibleModel("inline"), retry, {
          input_mapping: { topic: "tides", marker: `[[key:${key}]] [[invalid-json]]` },
        }),
      ]),
      {},
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.invalid_output");
    expect(run.error.message).toContain("Sure! Here is the JSON you asked for: {");
    // The call and its one repair (the default); the retry policy does not retry an invalid answer.
    expect((await seen(key)).count).toBe(2);
    // The model answered, so the call was paid for: its tokens count on the run.
    expect(run.usage.input_tokens).toBeGreaterThan(0);
    expect(run.usage.output_tokens).toBeGreaterThan(0);
    expect(run.usage.cost_usd).toBeGreaterThan(0);
  });

  it("fails the step with llm.invalid_output naming the schema problem when the JSON has the wrong shape", async ({
    expect,
  }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep(
          "ask",
          SUMMARY_PROMPT,
          compatibleModel("inline"),
          {},
          { input_mapping: { topic: "tides", marker: "[[wrong-shape]]" } },
        ),
      ]),
      {},
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.invalid_output");
    expect(run.error.message).toMatch(/does not match the prompt's "produces" schema/);
    expect(run.error.message).toContain('{\\"unexpected\\":true}');
    // The answer {"unexpected":true} is one word to the local server's counter; the call and its repair answered it.
    expect(run.usage.output_tokens).toBe(2);
    expect(run.usage.input_tokens).toBeGreaterThan(0);
  });

  it("checks an action-level produces without _meta, so the prompt's schema with additionalProperties false can be the action's", async ({
    expect,
  }) => {
    const step = (produces: unknown) =>
      llmStep(
        "answer",
        SUMMARY_PROMPT,
        compatibleModel("inline"),
        { produces },
        { input_mapping: { topic: "$.input.topic" } },
      );
    const run = await runWorkflow(singleTaskWorkflow(uniqueId("wf"), [step(SUMMARY_PROMPT.produces)]), {
      topic: "the tides",
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    // The output still reports the call's tokens and cost beside the answer.
    expect(run.output.result.answer).toEqual(TIDES_ANSWER);
    // The action's schema is still checked: one the answer does not meet fails the step, with the path.
    const stricter = { ...SUMMARY_PROMPT.produces, required: [...SUMMARY_PROMPT.produces.required, "source"] };
    const failed = await runWorkflow(singleTaskWorkflow(uniqueId("wf"), [step(stricter)]), { topic: "the tides" });
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("action.invalid_output");
    expect(failed.error.message).toContain('(output: Instance does not have required property "source".)');
    expect(failed.error.message).not.toContain("_meta");
  });

  it("answers the same prompt through the anthropic provider, with native structured output and with the JSON tool", async ({
    expect,
  }) => {
    const anthropic = (modelId: string) => ({
      provider: "anthropic",
      model_id: modelId,
      base_url: `${llmServer()}/v1`,
      api_key: "$env:LLM_API_KEY",
      pricing: PRICING,
    });
    const key = uniqueId("claude");
    const mapping = { topic: "$.input.topic", marker: `[[key:${key}]]` };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("native", SUMMARY_PROMPT, anthropic("claude-sonnet-4-5"), {}, { input_mapping: mapping }),
        llmStep("tool", SUMMARY_PROMPT, anthropic("claude-3-haiku-20240307"), {}, { input_mapping: mapping }),
      ]),
      { topic: "the tides" },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    for (const ref of ["native", "tool"]) {
      expect(run.output.result[ref]).toMatchObject({
        summary: "Summarise the tides",
        words: 3,
        mood: "calm",
        _meta: { tokens: { input: 5, output: 3 } },
      });
    }
    expect((await seen(key)).credentials).toEqual([TEST_SECRETS.LLM_API_KEY, TEST_SECRETS.LLM_API_KEY]);
    expect(run.usage).toEqual({ input_tokens: 10, output_tokens: 6, cost_usd: 0.00012 });
  });

  it("answers the same prompt through the openai provider at a custom base_url", async ({ expect }) => {
    const model = {
      provider: "openai",
      model_id: "gpt-4o-mini",
      base_url: `${llmServer()}/v1`,
      api_key: "$env:LLM_API_KEY",
    };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("ask", SUMMARY_PROMPT, model, {}, { input_mapping: { topic: "the tides", marker: "" } }),
      ]),
      {},
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.ask).toMatchObject({ summary: "Summarise the tides", words: 3, mood: "calm" });
  });

  it("answers the same prompt through workers-ai, here the test double of the AI binding", async ({ expect }) => {
    const model = { provider: "workers-ai", model_id: "@cf/meta/llama-3.3-70b-instruct-fp8-fast", pricing: PRICING };
    const before = FAKE_BINDINGS.AI.calls.length;
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("ask", SUMMARY_PROMPT, model, {}, { input_mapping: { topic: "the tides", marker: "" } }),
      ]),
      {},
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.ask).toEqual(TIDES_ANSWER);
    expect(FAKE_BINDINGS.AI.calls.slice(before).map((call) => call.model)).toContain(
      "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
    );
  });

  it("retries a 503 and a 429 by the retry policy, honouring Retry-After", async ({ expect }) => {
    const retry = { execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10, max_delay_ms: 50 } } };
    const keys = { unavailable: uniqueId("u"), limited: uniqueId("l") };
    const started = Date.now();
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("unavailable", SUMMARY_PROMPT, compatibleModel("inline"), retry, {
          input_mapping: { topic: "tides", marker: `[[key:${keys.unavailable}]] [[fail:503]] [[times:1]]` },
        }),
        llmStep("limited", SUMMARY_PROMPT, compatibleModel("inline"), retry, {
          input_mapping: {
            topic: "tides",
            marker: `[[key:${keys.limited}]] [[fail:429]] [[times:1]] [[retry-after:1]]`,
          },
        }),
      ]),
      {},
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect((await seen(keys.unavailable)).count).toBe(2);
    expect((await seen(keys.limited)).count).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it("fails with llm.network when the server cannot be reached", async ({ expect }) => {
    // Port 9 (discard) on loopback: nothing listens there.
    const model = { provider: "openai-compatible", model_id: "m", base_url: "http://127.0.0.1:9/v1" };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("ask", SUMMARY_PROMPT, model, {}, { input_mapping: { topic: "tides", marker: "" } }),
      ]),
      {},
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.network");
  });

  it("fails at once on a 4xx answer, with llm.status and no retry", async ({ expect }) => {
    const key = uniqueId("4xx");
    const retry = { execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10 } } };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStep("ask", SUMMARY_PROMPT, compatibleModel("inline"), retry, {
          input_mapping: { topic: "tides", marker: `[[key:${key}]] [[fail:400]]` },
        }),
      ]),
      {},
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.status");
    expect(run.error.message).toMatch(/answered 400/);
    expect((await seen(key)).count).toBe(1);
  });
});

/** An llm step whose implementation has more than a prompt and a model (`repair`, `fallback_models`). */
function llmStepWith(
  ref: string,
  prompt: unknown,
  model: unknown,
  implementation: Record<string, unknown>,
  step: Record<string, unknown> = {},
) {
  return {
    ref,
    action: { kind: "llm", implementation: { prompt, model, ...implementation } },
    output_mapping: { [`output.${ref}`]: "$" },
    ...step,
  };
}

type SeenMessage = { role: string; text: string };

async function requestsSeen(key: string): Promise<Array<{ model: string; messages: SeenMessage[] }>> {
  const body = (await (await fetch(`${llmServer()}/requests/${key}`)).json()) as {
    requests: Array<{ model: string; messages: SeenMessage[] }>;
  };
  return body.requests;
}

/** The attempts of the first step of the run's task.completed or task.failed entry. */
async function attemptsOf(runId: string) {
  const entry = (await journal(runId)).find((e) => e.kind === "task.completed" || e.kind === "task.failed");
  return stepsOf(entry)[0]?.attempts ?? [];
}

function anthropicModel(modelId: string, extra: Record<string, unknown> = {}) {
  return {
    provider: "anthropic",
    model_id: modelId,
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
    pricing: PRICING,
    ...extra,
  };
}

const VALID_SUMMARY = { summary: "the tides, repaired", words: 3, mood: "stormy" };

describe("llm repair", () => {
  for (const [provider, model] of [
    ["openai-compatible", () => compatibleModel("inline")],
    ["anthropic (native structured output)", () => anthropicModel("claude-sonnet-4-5")],
    ["anthropic (the JSON tool)", () => anthropicModel("claude-3-haiku-20240307")],
  ] as const) {
    it(`sends an answer that does not match produces back to the model with the problems, and returns the repaired one: ${provider}`, async ({
      expect,
    }) => {
      const key = uniqueId("repair");
      await postLlmScript(key, [{ json: { summary: "x", words: "three" } }, { json: VALID_SUMMARY }]);
      const run = await runWorkflow(
        singleTaskWorkflow(uniqueId("wf"), [
          llmStep(
            "answer",
            SUMMARY_PROMPT,
            model(),
            {},
            { input_mapping: { topic: "tides", marker: `[[script:${key}]]` } },
          ),
        ]),
      );
      expect(run.status, JSON.stringify(run.error)).toBe("completed");
      const { _meta: meta, ...answer } = run.output.result.answer;
      expect(answer).toEqual(VALID_SUMMARY);
      // Two calls, each its own attempt: the first rejected and followed at once by the repair.
      const attempts = await attemptsOf(run.run_id);
      expect(attempts).toHaveLength(2);
      expect(attempts[0]).toMatchObject({
        attempt: 1,
        error: { code: "llm.invalid_output", retryable: false },
        retry_in_ms: 0,
        retry_reason: "repair",
      });
      expect(attempts[1]?.error).toBeUndefined();
      // The model was told what was wrong, after its own answer.
      const [first, second] = await requestsSeen(key);
      expect(second?.messages.slice(first?.messages.length)).toEqual([
        { role: "assistant", text: expect.stringContaining('"words":"three"') },
        {
          role: "user",
          text: expect.stringMatching(
            /^Your answer does not match the required JSON Schema: answer.*required property "mood".*answer\.words.*\. Answer again with JSON only\.$/,
          ),
        },
      ]);
      // Both calls were paid for: _meta, the run's usage and the run view add them up.
      const tokens = attempts.map((a) => a.call?.tokens as { input: number; output: number });
      const input = (tokens[0]?.input ?? 0) + (tokens[1]?.input ?? 0);
      const output = (tokens[0]?.output ?? 0) + (tokens[1]?.output ?? 0);
      expect(tokens[0]?.output).toBeGreaterThan(0);
      expect(tokens[1]?.input).toBeGreaterThan(tokens[0]?.input ?? 0);
      const cost = Math.round(((input * 3 + output * 15) / 1e6) * 1e9) / 1e9;
      expect(meta).toEqual({ tokens: { input, output }, cost_usd: cost });
      expect(run.usage).toEqual({ input_tokens: input, output_tokens: output, cost_usd: cost });
      expect(run.nodes.main.invocations[0].steps[0]).toMatchObject({ attempts: 2, tokens: { input, output } });
    });
  }

  it("fails llm.invalid_output after 1 + repair calls, counting every call's tokens", async ({ expect }) => {
    const key = uniqueId("norepair");
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStepWith(
          "ask",
          SUMMARY_PROMPT,
          compatibleModel("inline"),
          { repair: 2 },
          { input_mapping: { topic: "tides", marker: `[[key:${key}]] [[wrong-shape]]` } },
        ),
      ]),
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.invalid_output");
    expect(run.error.message).toMatch(/\(after 2 repairs\); the model answered/);
    expect((await seen(key)).count).toBe(3);
    const attempts = await attemptsOf(run.run_id);
    expect(attempts.map((a) => a.retry_reason)).toEqual(["repair", "repair", undefined]);
    // Each answer, {"unexpected":true}, is one word to the local server's counter.
    expect(run.usage.output_tokens).toBe(3);
    const inputs = attempts.map((a) => (a.call?.tokens as { input: number } | undefined)?.input ?? 0);
    expect(run.usage.input_tokens).toBe(inputs.reduce((total, n) => total + n, 0));
  });

  it("asks no repair with repair: 0, and repairs an answer that is not JSON", async ({ expect }) => {
    const keys = { none: uniqueId("r0"), text: uniqueId("rt") };
    await postLlmScript(keys.text, [{ text: "Sure! {" }, { json: VALID_SUMMARY }]);
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStepWith(
          "none",
          SUMMARY_PROMPT,
          compatibleModel("inline"),
          { repair: 0 },
          { input_mapping: { topic: "tides", marker: `[[key:${keys.none}]] [[wrong-shape]]` }, on_failure: "continue" },
        ),
        llmStep(
          "text",
          SUMMARY_PROMPT,
          compatibleModel("inline"),
          {},
          {
            input_mapping: { topic: "tides", marker: `[[script:${keys.text}]]` },
          },
        ),
      ]),
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect((await seen(keys.none)).count).toBe(1);
    expect(run.output.result.text).toMatchObject(VALID_SUMMARY);
    const repairRequest = (await requestsSeen(keys.text))[1]?.messages.at(-1);
    expect(repairRequest).toEqual({
      role: "user",
      text: "Your answer is not JSON. Answer again with JSON only, matching the required JSON Schema.",
    });
  });
});

describe("llm fallback models", () => {
  const FALLBACK_PRICING = { input_per_mtok: 1, output_per_mtok: 2 };

  it("tries the next model at once after a 503, journals both calls, and prices the answer by the model that gave it", async ({
    expect,
  }) => {
    const ids = { primary: uniqueId("primary"), fallback: uniqueId("fallback") };
    const key = uniqueId("fb");
    // Without fallback models this policy would wait 60 s before the next call.
    const retry = { execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 60_000 } } };
    const started = Date.now();
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        {
          ref: "answer",
          action: {
            kind: "llm",
            implementation: {
              prompt: SUMMARY_PROMPT,
              model: compatibleModel("inline", { model_id: ids.primary }),
              fallback_models: [compatibleModel("inline", { model_id: ids.fallback, pricing: FALLBACK_PRICING })],
            },
            ...retry,
          },
          input_mapping: { topic: "$.input.topic", marker: `[[key:${key}]] [[fail-model:${ids.primary}:503]]` },
          output_mapping: { "output.answer": "$" },
        },
      ]),
      { topic: "the tides" },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(Date.now() - started).toBeLessThan(30_000);
    expect((await requestsSeen(key)).map((r) => r.model)).toEqual([ids.primary, ids.fallback]);
    const attempts = await attemptsOf(run.run_id);
    expect(attempts).toEqual([
      {
        attempt: 1,
        duration_ms: expect.any(Number),
        error: expect.objectContaining({ code: "llm.status", retryable: true }),
        retry_in_ms: 0,
        retry_reason: "fallback",
        call: expect.objectContaining({ provider: "openai-compatible", model: ids.primary }),
      },
      {
        attempt: 2,
        duration_ms: expect.any(Number),
        call: expect.objectContaining({ model: ids.fallback, tokens: { input: 5, output: 3 }, cost_usd: 0.000011 }),
      },
    ]);
    expect(attempts[0]?.error?.message).toMatch(/answered 503/);
    expect(attempts[0]?.call?.tokens).toBeUndefined();
    // 5 tokens in at $1/Mtok, 3 out at $2/Mtok: the fallback's pricing, not the primary's.
    expect(run.output.result.answer._meta).toEqual({ tokens: { input: 5, output: 3 }, cost_usd: 0.000011 });
    expect(run.usage).toEqual({ input_tokens: 5, output_tokens: 3, cost_usd: 0.000011 });
  });

  it("falls back from an anthropic model that answers 529 and from one that times out", async ({ expect }) => {
    const key = uniqueId("fba");
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStepWith(
          "overloaded",
          SUMMARY_PROMPT,
          anthropicModel("claude-sonnet-4-5"),
          { fallback_models: [anthropicModel("claude-3-haiku-20240307")] },
          { input_mapping: { topic: "the tides", marker: `[[key:${key}]] [[fail-model:claude-sonnet-4-5:529]]` } },
        ),
      ]),
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.overloaded).toMatchObject({ summary: "Summarise the tides", mood: "calm" });
    expect((await requestsSeen(key)).map((r) => r.model)).toEqual(["claude-sonnet-4-5", "claude-3-haiku-20240307"]);
    expect((await attemptsOf(run.run_id)).map((a) => [a.error?.code, a.retry_reason])).toEqual([
      ["llm.status", "fallback"],
      [undefined, undefined],
    ]);
    // A model that does not answer within the action's timeout_ms is a timeout: the next model is tried.
    const slowKey = uniqueId("fbslow");
    const slow = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        {
          ref: "slow",
          action: {
            kind: "llm",
            implementation: {
              prompt: SUMMARY_PROMPT,
              model: anthropicModel("claude-sonnet-4-5"),
              fallback_models: [anthropicModel("claude-3-haiku-20240307")],
            },
            execution: { timeout_ms: 300, retry_policy: { max_attempts: 1 } },
          },
          input_mapping: { topic: "the tides", marker: `[[key:${slowKey}]] [[slow-model:claude-sonnet-4-5:5000]]` },
          output_mapping: { "output.slow": "$" },
        },
      ]),
    );
    expect(slow.status, JSON.stringify(slow.error)).toBe("completed");
    expect(slow.output.result.slow).toMatchObject({ summary: "Summarise the tides" });
    expect((await attemptsOf(slow.run_id)).map((a) => [a.error?.code, a.retry_reason])).toEqual([
      ["action.timeout", "fallback"],
      [undefined, undefined],
    ]);
  });

  it("does not fall back on a 400, which fails the step at once", async ({ expect }) => {
    const key = uniqueId("fb400");
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        llmStepWith(
          "ask",
          SUMMARY_PROMPT,
          compatibleModel("inline", { model_id: "bad-request" }),
          { fallback_models: [compatibleModel("inline", { model_id: "never-asked" })] },
          { input_mapping: { topic: "tides", marker: `[[key:${key}]] [[fail-model:bad-request:400]]` } },
        ),
      ]),
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.status");
    expect((await requestsSeen(key)).map((r) => r.model)).toEqual(["bad-request"]);
    expect(await attemptsOf(run.run_id)).toHaveLength(1);
  });

  it("starts again at the first model by the retry policy once every model failed", async ({ expect }) => {
    const key = uniqueId("fball");
    const retry = { execution: { retry_policy: { max_attempts: 2, initial_delay_ms: 10, max_delay_ms: 10 } } };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [
        {
          ref: "ask",
          action: {
            kind: "llm",
            implementation: {
              prompt: SUMMARY_PROMPT,
              model: compatibleModel("inline", { model_id: "a" }),
              fallback_models: [compatibleModel("inline", { model_id: "b" })],
            },
            ...retry,
          },
          input_mapping: { topic: "tides", marker: `[[key:${key}]] [[fail:503]]` },
        },
      ]),
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("llm.status");
    expect((await requestsSeen(key)).map((r) => r.model)).toEqual(["a", "b", "a", "b"]);
    expect((await attemptsOf(run.run_id)).map((a) => a.retry_reason)).toEqual([
      "fallback",
      "backoff",
      "fallback",
      undefined,
    ]);
  });

  it("freezes a fallback model registered by reference into the run when it starts", async ({ expect }) => {
    const ids = { primary: uniqueId("p"), fallback: uniqueId("f"), workflow: uniqueId("wf") };
    const key = uniqueId("fbfrozen");
    const fallback = (modelId: string) => ({ ...compatibleModel(ids.fallback), model_id: modelId });
    await register({
      models: [compatibleModel(ids.primary, { model_id: "down" }), fallback("fallback-one")],
      workflows: [
        singleTaskWorkflow(ids.workflow, [
          llmStepWith(
            "ask",
            SUMMARY_PROMPT,
            ids.primary,
            { fallback_models: [ids.fallback] },
            { input_mapping: { topic: "tides", marker: `[[key:${key}]] [[fail-model:down:503]]` } },
          ),
        ]),
      ],
    });
    const started = await api("POST", `/v1/workflows/${ids.workflow}/runs`, { input: {} });
    // Registered after the run started: a new version the running run must not see.
    await register({ models: [fallback("fallback-two")] });
    const run = await waitForRun(started.json.run_id);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect((await requestsSeen(key)).map((r) => r.model)).toEqual(["down", "fallback-one"]);
  });
});

describe("llm definitions", () => {
  it("rejects a model with a literal API key at registration, registered or inline", async ({ expect }) => {
    const model = { id: uniqueId("leaky"), provider: "openai", model_id: "gpt-4o", api_key: "sk-live-0123456789" };
    const inline = singleTaskWorkflow(uniqueId("wf"), [
      llmStep("ask", SUMMARY_PROMPT, {
        provider: "anthropic",
        model_id: "claude-sonnet-4-5",
        api_key: "sk-ant-literal",
      }),
    ]);
    const response = await api("POST", "/v1/definitions", { models: [model], workflows: [inline] });
    expect(response.status).toBe(400);
    const problems = response.json.error.details.map(
      (detail: { path: string; code: string }) => `${detail.path} ${detail.code}`,
    );
    expect(problems).toContain("models.0.api_key definition.literal_secret");
    expect(problems).toContain(
      "workflows.0.nodes.main.task.steps.0.action.implementation.model.api_key definition.literal_secret",
    );
    expect(JSON.stringify(response.json)).not.toContain("sk-live-0123456789");
  });

  it("checks fallback models as it checks the model, and bounds repair and fallback_models", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      workflows: [
        singleTaskWorkflow(uniqueId("wf"), [
          llmStepWith("ask", SUMMARY_PROMPT, compatibleModel("inline"), {
            repair: 6,
            fallback_models: [
              { provider: "openai", model_id: "gpt-4o", api_key: "sk-literal-fallback" },
              { provider: "openai-compatible", model_id: "m" },
              uniqueId("unregistered"),
            ],
          }),
        ]),
      ],
    });
    expect(response.status).toBe(400);
    const at = "workflows.0.nodes.main.task.steps.0.action.implementation";
    const problems = response.json.error.details.map(
      (detail: { path: string; code: string }) => `${detail.path} ${detail.code}`,
    );
    expect(problems).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^${at}\\.repair `))]));
    const second = await api("POST", "/v1/definitions", {
      workflows: [
        singleTaskWorkflow(uniqueId("wf"), [
          llmStepWith("ask", SUMMARY_PROMPT, compatibleModel("inline"), {
            fallback_models: [
              { provider: "openai", model_id: "gpt-4o", api_key: "sk-literal-fallback" },
              { provider: "openai-compatible", model_id: "m" },
              "unregistered-model-for-fallback",
            ],
          }),
        ]),
      ],
    });
    expect(second.status).toBe(400);
    const codes = second.json.error.details.map(
      (detail: { path: string; code: string }) => `${detail.path} ${detail.code}`,
    );
    expect(codes).toEqual(
      expect.arrayContaining([
        `${at}.fallback_models.0.api_key definition.literal_secret`,
        `${at}.fallback_models.1.base_url definition.missing_base_url`,
        expect.stringMatching(new RegExp(`^${at}\\.fallback_models\\.2 `)),
      ]),
    );
    expect(JSON.stringify(second.json)).not.toContain("sk-literal-fallback");
  });

  it("rejects an openai-compatible model without base_url and a prompt whose produces is not an object", async ({
    expect,
  }) => {
    const response = await api("POST", "/v1/definitions", {
      models: [{ id: uniqueId("nourl"), provider: "openai-compatible", model_id: "m" }],
      prompts: [{ id: uniqueId("list"), messages: [{ role: "user", template: "x" }], produces: { type: "array" } }],
    });
    expect(response.status).toBe(400);
    const codes = response.json.error.details.map((detail: { code: string }) => detail.code);
    expect(codes).toEqual(expect.arrayContaining(["definition.missing_base_url", "definition.invalid_produces"]));
  });

  it("freezes the prompt and the model into the run when it starts", async ({ expect }) => {
    const ids = { prompt: uniqueId("p"), model: uniqueId("m"), workflow: uniqueId("wf") };
    await register({
      prompts: [{ id: ids.prompt, messages: [{ role: "user", template: "first {{x}}" }] }],
      models: [compatibleModel(ids.model)],
      workflows: [
        singleTaskWorkflow(ids.workflow, [
          llmStep("ask", ids.prompt, ids.model, {}, { input_mapping: { x: "$.input.x" } }),
        ]),
      ],
    });
    const start = await api("POST", `/v1/workflows/${ids.workflow}/runs`, { input: { x: "one" } });
    // Registered after the run started: a new version the running run must not see.
    await register({ prompts: [{ id: ids.prompt, messages: [{ role: "user", template: "second {{x}}" }] }] });
    const run = await waitForRun(start.json.run_id);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.ask.content).toBe("Echo: first one");
  });
});

describe("secrets", () => {
  it("never puts a resolved secret in the journal, the run view or the events, even when a peer echoes it in an error", async ({
    expect,
  }) => {
    const server = uniqueId("srv");
    const key = uniqueId("k");
    const workflow = {
      id: uniqueId("wf"),
      tools: [`mcp:${server}/echo`],
      nodes: {
        main: {
          task: {
            steps: [
              llmStep(
                "ask",
                SUMMARY_PROMPT,
                compatibleModel("inline"),
                {},
                { input_mapping: { topic: "tides", marker: "" } },
              ),
              // The peer answers 401 quoting the key it received; the step error is journaled, scrubbed.
              llmStep(
                "leaky",
                SUMMARY_PROMPT,
                compatibleModel("inline"),
                {},
                { input_mapping: { topic: "tides", marker: "[[echo-credential]]" }, on_failure: "continue" },
              ),
              {
                ref: "tool",
                action: { kind: "mcp", implementation: { server, tool: "echo" } },
                input_mapping: { message: "hello" },
              },
              {
                ref: "errors",
                action: { kind: "context", implementation: { updates: [{ path: "errors", expr: "input.errors" }] } },
                input_mapping: { errors: "$.state._errors" },
                output_mapping: { "output.errors": "$.errors" },
              },
            ],
          },
          output_mapping: { "output.result": "$" },
        },
      },
    };
    const run = await runWorkflow(
      workflow,
      {},
      {
        mcp_servers: [
          { id: server, url: `${mcpServer()}/k/${key}/mcp`, headers: { authorization: "Bearer $env:MCP_TOKEN" } },
        ],
      },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.errors[0].error.message).toContain("Incorrect API key provided: Bearer [redacted]");
    const stats = (await (await fetch(`${mcpServer()}/_stats/${key}`)).json()) as { authorization: string[] };
    expect(stats.authorization).toContain(`Bearer ${TEST_SECRETS.MCP_TOKEN}`);

    const journal = JSON.stringify((await api("GET", `/v1/runs/${run.run_id}/journal`)).json);
    const view = JSON.stringify((await api("GET", `/v1/runs/${run.run_id}`)).json);
    const events = await (
      await exports.default.fetch(`http://trellis.test/v1/runs/${run.run_id}/events`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    ).text();
    // The scrubbed peer error travelled into the task output, so into the journal and the events.
    expect(journal).toContain("Incorrect API key provided: Bearer [redacted]");
    expect(events).toContain("event: attest");
    for (const text of [journal, view, events]) {
      expect(text).not.toContain(TEST_SECRETS.LLM_API_KEY);
      expect(text).not.toContain(TEST_SECRETS.MCP_TOKEN);
    }
  });
});
