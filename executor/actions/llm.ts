import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  AISDKError,
  APICallError,
  generateText,
  jsonSchema,
  NoObjectGeneratedError,
  Output,
  tool,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  type ToolSet,
} from "ai";
import { createWorkersAI } from "workers-ai-provider";
import { EngineError } from "../../lib/errors.ts";
import { recordable } from "../../lib/recordable.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import { validateJson } from "../../lib/json-schema.ts";
import type { AgentCall, AgentTurn } from "../../schemas/agent.ts";
import type { Json, JsonObject, JsonSchema } from "../../schemas/common.ts";
import type { ResolvedModel, ResolvedPrompt } from "../../schemas/resolved.ts";
import { cappedFetch } from "../capped-fetch.ts";
import { redactSecrets, resolveSecrets, resolveSecretsTracked } from "../secrets.ts";
import { retryAfterMs } from "../../lib/retry.ts";
import { isRemoteOnlyBindingError } from "./remote-only.ts";
import type { ActionContext, ActionHandler, AgentTurnContext, LlmChainState, ResolvedActionOf } from "./types.ts";

/** How much of a model's answer an error message quotes. */
export const MAX_QUOTED_ANSWER_CHARS = 2_000;

/** Repairs asked when an action sets no `repair`. */
export const DEFAULT_LLM_REPAIRS = 1;

/** The chain state of an invocation's first call: the first model, nothing spent. */
export const FIRST_LLM_CALL: LlmChainState = {
  model: 0,
  repairs: 0,
  messages: [],
  spent: { input: 0, output: 0, cost_usd: 0 },
};

/**
 * `llm`: renders the prompt's messages (Handlebars over the action input),
 * calls the model through the AI SDK and returns the parsed object when the
 * prompt has `produces` (validated against it), else `{ content }`; always
 * with `_meta: { tokens: { input, output }, cost_usd }` (every answered call
 * of the invocation, each priced by its model), added after that check (an
 * action-level `produces` is checked without it too: `checkProduces`).
 *
 * One run is one model call; `invokeAction` chains the next (`context.chain`):
 * an answer that is not JSON or does not match `produces` is sent back to the
 * same model with the problems, up to `repair` times (default 1); a 429, 5xx,
 * timeout or network failure goes to the next of `fallback_models` at once,
 * and past the last one the retry policy starts again at the first model.
 *
 * Errors: 429, 5xx and network failures are retryable (`llm.status`,
 * `llm.network`, with the provider's Retry-After); other 4xx are not; an
 * answer that is not JSON or does not match `produces` after its repairs is
 * `llm.invalid_output` (not retryable: a step `on_failure: "retry"` re-runs
 * the task if wanted). The SDK's own retries are off.
 */
export const llmAction: ActionHandler<"llm"> = {
  async run(action, input, context) {
    const { prompt } = action.implementation;
    const models = modelChain(action);
    const state = context.chain?.state ?? FIRST_LLM_CALL;
    const model = models[state.model] ?? action.implementation.model;
    const fallback = state.model + 1 < models.length;
    // Before the call: what follows if it fails for want of an answer (a timeout included).
    context.chain?.follow({ ...state, model: fallback ? state.model + 1 : 0 }, fallback ? "fallback" : undefined);
    const credentials = model.api_key === undefined ? undefined : resolveSecretsTracked(model.api_key, context.env);
    const secrets = credentials?.secrets ?? [];
    const rendered = [...renderMessages(prompt, input), ...state.messages];
    context.note?.({ provider: model.provider, model: model.model_id, messages: await recordable(rendered) });
    let answered: Answered;
    try {
      answered = await callModel(model, credentials?.value, withHistory(rendered, context), prompt.produces, context);
    } catch (thrown) {
      throw withSpent(toLlmError(thrown, model, secrets, context.signal), state.spent);
    }
    const meta = toMeta(answered.usage, model);
    context.note?.({ ...meta, finish_reason: answered.finishReason, answer: await recordable(answered.text) });
    const spent = addSpent(state.spent, meta);
    context.agent?.answered(turnOf(model, meta, answered, state));
    if (answered.calls.length > 0) {
      // A turn that asks for tools: the agent loop (executor/agent.ts) takes the calls from `answered`.
      context.note?.({ tool_calls: answered.calls.map(({ id, name }) => ({ id, name })) });
      return { _meta: toMetaJson(spent) };
    }
    const checked = checkAnswer(answered, prompt.produces);
    if (!("problem" in checked)) {
      return { ...checked.answer, _meta: toMetaJson(spent) };
    }
    if (state.repairs < (action.implementation.repair ?? DEFAULT_LLM_REPAIRS)) {
      context.chain?.follow(repairState(state, answered.text, checked.problem, spent), "repair");
    }
    const error = invalidOutput(model, checked.problem, answered.text, state.repairs, secrets);
    throw error.withMeta(toMetaJson(spent));
  },
};

/** `[model, ...fallback_models]`: the order in which the models are tried. */
function modelChain(action: ResolvedActionOf<"llm">): ResolvedModel[] {
  return [action.implementation.model, ...(action.implementation.fallback_models ?? [])];
}

/** A message of the call: the prompt's, rendered, then those a repair added. */
type ChainMessage = { role: ResolvedPrompt["messages"][number]["role"]; content: string };

/** The messages of an agent's turn: the prompt, the loop's tool calls and results, then any repair. */
function withHistory(rendered: ChainMessage[], context: ActionContext): ModelMessage[] {
  const prompt = rendered.slice(0, rendered.length - (context.chain?.state?.messages.length ?? 0));
  const repairs = rendered.slice(prompt.length);
  return [...prompt.map(toModelMessage), ...(context.agent?.messages ?? []), ...repairs.map(toModelMessage)];
}

function toModelMessage(message: ChainMessage): ModelMessage {
  return message.role === "system"
    ? { role: "system", content: message.content }
    : message.role === "user"
      ? { role: "user", content: message.content }
      : { role: "assistant", content: message.content };
}

/** The record of a call that answered, for the agent loop: who answered, what it cost, what it asked. */
function turnOf(model: ResolvedModel, meta: Meta, answered: Answered, state: LlmChainState): AgentTurn {
  return {
    model: model.id,
    tokens: meta.tokens,
    cost_usd: meta.cost_usd,
    finish_reason: answered.finishReason,
    ...(state.messages.length > 0 ? { repair: true as const } : {}),
    ...(answered.calls.length > 0 && answered.text !== "" ? { text: answered.text } : {}),
    calls: answered.calls,
  };
}

/** Tokens as the SDK reports them (either may be unknown). */
type Usage = Pick<LanguageModelUsage, "inputTokens" | "outputTokens">;

/** What a model answered: its text, usage, finish reason and, with `produces`, the parsed value. */
interface Answered {
  text: string;
  usage: Usage | undefined;
  finishReason: string;
  /** The tools an agent's model asked for (none: it answered). */
  calls: AgentCall[];
  /** With `produces`: the parsed answer, or `NOT_JSON` when the text is not JSON. */
  parsed?: unknown;
}

const NOT_JSON = Symbol("not JSON");

/** One call of the model; an answer that is not JSON comes back marked so, not as an error. */
async function callModel(
  model: ResolvedModel,
  apiKey: string | undefined,
  messages: ModelMessage[],
  produces: ResolvedPrompt["produces"],
  context: ActionContext,
): Promise<Answered> {
  try {
    const settings = toCallSettings(model, context.agent);
    const result = await generateText({
      model: createLanguageModel(model, apiKey, context),
      messages,
      // Prompt messages come from definitions, not from run data: their roles are trusted.
      allowSystemInMessages: true,
      maxRetries: 0,
      abortSignal: context.signal,
      ...settings,
      ...(context.agent === undefined ? {} : { tools: toolSet(context.agent), toolChoice: "auto" as const }),
      ...(produces === undefined ? {} : { output: Output.object({ schema: toSchema(produces) }) }),
    });
    const calls = result.toolCalls.map((call) => ({
      id: call.toolCallId,
      name: call.toolName,
      input: toJson(call.input),
    }));
    const answered = { text: result.text, usage: result.totalUsage, finishReason: result.finishReason, calls };
    // A turn that asks for tools has no output to read (the SDK throws if asked).
    return produces === undefined || calls.length > 0 ? answered : { ...answered, parsed: result.output };
  } catch (thrown) {
    if (!NoObjectGeneratedError.isInstance(thrown) || context.signal.aborted) {
      throw thrown;
    }
    const finishReason = String(thrown.finishReason ?? "unknown");
    return { text: thrown.text ?? "", usage: thrown.usage, finishReason, calls: [], parsed: NOT_JSON };
  }
}

function toSchema(schema: JsonSchema): ReturnType<typeof jsonSchema> {
  return jsonSchema(schema === true ? {} : schema === false ? { not: {} } : schema);
}

/**
 * The tools as the SDK offers them: a schema and no `execute`, so the SDK
 * returns the calls and runs nothing (the coordinator runs each as a step).
 */
function toolSet(agent: AgentTurnContext): ToolSet {
  const tools: ToolSet = {};
  for (const offered of agent.tools) {
    tools[offered.name] = tool({
      ...(offered.description === undefined ? {} : { description: offered.description }),
      inputSchema: toSchema(offered.input_schema),
    });
  }
  return tools;
}

/** A tool call's input as the SDK parsed it (JSON text from the provider): JSON again. */
function toJson(value: unknown): Json {
  return value === undefined ? null : (JSON.parse(JSON.stringify(value)) as Json);
}

/** Why an answer is not what `produces` asks: not JSON at all, or the validator's problems. */
type Problem = { kind: "not_json" } | { kind: "schema"; why: string };

/**
 * The output (`{ content }`, or the parsed answer checked against `produces`
 * with the engine's validator: the SDK only parses it), or its problem.
 */
function checkAnswer(
  answered: Answered,
  produces: ResolvedPrompt["produces"],
): { answer: JsonObject } | { problem: Problem } {
  if (produces === undefined) {
    return { answer: { content: answered.text } };
  }
  const parsed = answered.parsed;
  if (parsed === NOT_JSON) {
    return { problem: { kind: "not_json" } };
  }
  const problems = validateJson(produces, parsed, "answer");
  if (problems.length > 0 || parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    const why =
      problems.length > 0
        ? problems.map((problem) => `${problem.path}: ${problem.message}`).join("; ")
        : "it is not a JSON object";
    return { problem: { kind: "schema", why } };
  }
  return { answer: parsed as JsonObject };
}

/** The next call's state: the same model, told what was wrong with its answer. */
function repairState(state: LlmChainState, text: string, problem: Problem, spent: Spent): LlmChainState {
  const request =
    problem.kind === "not_json"
      ? "Your answer is not JSON. Answer again with JSON only, matching the required JSON Schema."
      : `Your answer does not match the required JSON Schema: ${problem.why}. Answer again with JSON only.`;
  return {
    model: state.model,
    repairs: state.repairs + 1,
    messages: [...state.messages, { role: "assistant", content: text }, { role: "user", content: request }],
    spent,
  };
}

/** `llm.invalid_output`, quoting the answer (scrubbed: a model may echo what it was sent). */
function invalidOutput(
  model: ResolvedModel,
  problem: Problem,
  text: string,
  repairs: number,
  secrets: readonly string[],
): EngineError {
  const after = repairs === 0 ? "" : ` (after ${repairs} repair${repairs === 1 ? "" : "s"})`;
  const what =
    problem.kind === "not_json"
      ? `is not the JSON the prompt's "produces" asks for${after}`
      : `does not match the prompt's "produces" schema (${problem.why})${after}`;
  const message = `the answer of model ${model.id} ${what}; the model answered: ${quote(text)}`;
  return EngineError.terminal("llm.invalid_output", redactSecrets(message, secrets));
}

/** Tokens and cost of an invocation's answered calls. */
type Spent = LlmChainState["spent"];

function addSpent(spent: Spent, meta: Meta): Spent {
  return {
    input: spent.input + meta.tokens.input,
    output: spent.output + meta.tokens.output,
    // Rounded to a billionth of a dollar, so sums do not show float noise.
    cost_usd: Math.round((spent.cost_usd + meta.cost_usd) * 1e9) / 1e9,
  };
}

/** `_meta` of what was spent. */
function toMetaJson(spent: Spent): JsonObject {
  return { tokens: { input: spent.input, output: spent.output }, cost_usd: spent.cost_usd };
}

/** A failure after earlier answered calls (a repair that got a 503) still reports what they cost. */
function withSpent(thrown: unknown, spent: Spent): unknown {
  const paid = spent.input > 0 || spent.output > 0 || spent.cost_usd > 0;
  return paid && thrown instanceof EngineError ? thrown.withMeta(toMetaJson(spent)) : thrown;
}

/** A prompt message as sent: its role and its rendered text (JSON, so the call record can keep it). */
type RenderedMessage = ChainMessage;

/** The prompt's messages, each template rendered over the action input. */
export function renderMessages(prompt: Pick<ResolvedPrompt, "messages">, input: Json): RenderedMessage[] {
  return prompt.messages.map((message) => ({ role: message.role, content: renderTemplate(message.template, input) }));
}

/**
 * The AI SDK model for a resolved model definition. `openai` uses the Chat
 * Completions API (`base_url` defaults to OpenAI's); `openai-compatible` the
 * same wire format at any `base_url`, with JSON-Schema structured output;
 * `anthropic` the Messages API; `workers-ai` the Worker's `AI` binding.
 */
function createLanguageModel(
  declared: ResolvedModel,
  apiKey: string | undefined,
  context: ActionContext,
): LanguageModel {
  // The SDK reads whole bodies itself: cap what it may read (the http action caps its own, more cheaply).
  const fetch = cappedFetch(context.fetch);
  const model =
    declared.base_url === undefined
      ? declared
      : { ...declared, base_url: resolveSecrets(declared.base_url, context.env) };
  switch (model.provider) {
    case "openai":
      return createOpenAI({ apiKey: requireKey(model, apiKey), baseURL: model.base_url, fetch }).chat(model.model_id);
    case "anthropic":
      return createAnthropic({ apiKey: requireKey(model, apiKey), baseURL: model.base_url, fetch })(model.model_id);
    case "openai-compatible":
      if (model.base_url === undefined) {
        throw EngineError.terminal("llm.bad_model", `model ${model.id} (openai-compatible) has no base_url`);
      }
      return createOpenAICompatible({
        name: "openaiCompatible",
        baseURL: model.base_url,
        apiKey,
        fetch,
        supportsStructuredOutputs: true,
        includeUsage: true,
      })(model.model_id);
    case "workers-ai": {
      const binding = context.env.AI;
      if (binding === undefined) {
        throw EngineError.terminal(
          "llm.no_binding",
          `model ${model.id} needs the Workers AI binding "AI", which this Worker does not have (it is remote-only: absent under wrangler dev --local)`,
        );
      }
      return createWorkersAI({ binding })(model.model_id);
    }
  }
}

/** OpenAI and Anthropic need a key; an absent one fails here, not as an opaque 401. */
function requireKey(model: ResolvedModel, apiKey: string | undefined): string {
  if (apiKey === undefined) {
    throw EngineError.terminal(
      "llm.bad_model",
      `model ${model.id} (${model.provider}) has no api_key: write it as "$env:NAME" and set NAME as a Worker secret`,
    );
  }
  return apiKey;
}

/** Model `parameters` the AI SDK knows by name; anything else goes to the provider as a provider option. */
const CALL_SETTINGS: Record<string, string> = {
  temperature: "temperature",
  top_p: "topP",
  top_k: "topK",
  max_tokens: "maxOutputTokens",
  max_output_tokens: "maxOutputTokens",
  seed: "seed",
  stop: "stopSequences",
  presence_penalty: "presencePenalty",
  frequency_penalty: "frequencyPenalty",
};

/** The provider option that asks for one tool call per turn (Workers AI has none: the coordinator then runs calls one at a time). */
const SERIAL_TOOL_CALLS: Record<ResolvedModel["provider"], JsonObject> = {
  "openai": { parallelToolCalls: false },
  "anthropic": { disableParallelToolUse: true },
  "openai-compatible": { parallel_tool_calls: false },
  "workers-ai": {},
};

const PROVIDER_OPTIONS_KEY: Record<ResolvedModel["provider"], string> = {
  "openai": "openai",
  "anthropic": "anthropic",
  "openai-compatible": "openaiCompatible",
  "workers-ai": "workers-ai",
};

function toCallSettings(model: ResolvedModel, agent: AgentTurnContext | undefined): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  const providerOptions: JsonObject = agent?.parallel === false ? { ...SERIAL_TOOL_CALLS[model.provider] } : {};
  for (const [name, value] of Object.entries(model.parameters ?? {})) {
    const setting = CALL_SETTINGS[name];
    if (setting === undefined) {
      providerOptions[name] = value;
    } else {
      settings[setting] = setting === "stopSequences" && typeof value === "string" ? [value] : value;
    }
  }
  if (Object.keys(providerOptions).length > 0) {
    settings.providerOptions = { [PROVIDER_OPTIONS_KEY[model.provider]]: providerOptions };
  }
  return settings;
}

/** One call's tokens and cost. */
type Meta = { tokens: { input: number; output: number }; cost_usd: number };

/** Tokens and cost; `pricing` is in US dollars per million tokens. */
function toMeta(usage: Usage | undefined, model: ResolvedModel): Meta {
  const input = usage?.inputTokens ?? 0;
  const output = usage?.outputTokens ?? 0;
  const pricing = model.pricing;
  const cost =
    pricing === undefined ? 0 : (input * pricing.input_per_mtok + output * pricing.output_per_mtok) / 1_000_000;
  // Rounded to a billionth of a dollar, so sums over a run do not show float noise.
  return { tokens: { input, output }, cost_usd: Math.round(cost * 1e9) / 1e9 };
}

function toLlmError(thrown: unknown, model: ResolvedModel, secrets: readonly string[], signal: AbortSignal): unknown {
  if (thrown instanceof EngineError || signal.aborted) {
    return thrown;
  }
  const scrub = (text: string) => redactSecrets(text, secrets);
  if (isRemoteOnlyBindingError(thrown)) {
    return EngineError.terminal(
      "llm.no_binding",
      `model ${model.id} needs the Workers AI binding, which is remote-only (not available under wrangler dev --local)`,
    );
  }
  if (APICallError.isInstance(thrown)) {
    const status = thrown.statusCode;
    const detail = scrub(
      `${model.provider} model ${model.id} ${status === undefined ? "could not be reached" : `answered ${status}`}: ${thrown.message}`,
    );
    if (status === undefined) {
      return EngineError.retryable("llm.network", detail);
    }
    if (status === 429) {
      // Throttled: the limits the call held pause for its Retry-After (executor/limits.ts).
      return EngineError.throttled("llm.status", detail, retryAfterOf(thrown.responseHeaders));
    }
    if (status >= 500) {
      return EngineError.retryable("llm.status", detail, retryAfterOf(thrown.responseHeaders));
    }
    return EngineError.terminal("llm.status", detail);
  }
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  if (AISDKError.isInstance(thrown)) {
    // The SDK's own verdicts (an invalid prompt, an unparseable response, …): trying again will not help.
    return EngineError.terminal("llm.failed", scrub(`${model.provider} model ${model.id} failed: ${message}`));
  }
  // Errors the SDK passes through come from fetch or the binding: Node says "fetch failed" (a
  // TypeError), workerd "Network connection lost." (an Error). Infrastructure: retryable.
  return EngineError.retryable(
    "llm.network",
    scrub(`${model.provider} model ${model.id} could not be reached: ${message}`),
  );
}

/** `retry-after-ms` (OpenAI) or `retry-after` (everyone). */
function retryAfterOf(headers: Record<string, string> | undefined): number | undefined {
  const ms = Number(headers?.["retry-after-ms"]);
  if (Number.isFinite(ms) && ms >= 0 && headers?.["retry-after-ms"] !== undefined) {
    return Math.round(ms);
  }
  return retryAfterMs(headers?.["retry-after"] ?? null);
}

function quote(text: string): string {
  return text.length > MAX_QUOTED_ANSWER_CHARS
    ? `${JSON.stringify(text.slice(0, MAX_QUOTED_ANSWER_CHARS))}… (${text.length} characters)`
    : JSON.stringify(text);
}
