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
  type LanguageModel,
  type LanguageModelUsage,
} from "ai";
import { createWorkersAI } from "workers-ai-provider";
import { EngineError } from "../../lib/errors.ts";
import { recordable } from "../../lib/recordable.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import { validateJson } from "../../lib/json-schema.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import type { ResolvedModel, ResolvedPrompt } from "../../schemas/resolved.ts";
import { cappedFetch } from "../capped-fetch.ts";
import { redactSecrets, resolveSecrets, resolveSecretsTracked } from "../secrets.ts";
import { retryAfterMs } from "../../lib/retry.ts";
import { isRemoteOnlyBindingError } from "./remote-only.ts";
import type { ActionContext, ActionHandler } from "./types.ts";

/** How much of a model's answer an error message quotes. */
export const MAX_QUOTED_ANSWER_CHARS = 2_000;

/**
 * `llm`: renders the prompt's messages (Handlebars over the action input),
 * calls the model through the AI SDK and returns the parsed object when the
 * prompt has `produces` (validated against it), else `{ content }`; always
 * with `_meta: { tokens: { input, output }, cost_usd }`, added after that check
 * (an action-level `produces` is checked without it too: `checkProduces`).
 *
 * Errors: 429, 5xx and network failures are retryable (`llm.status`,
 * `llm.network`, with the provider's Retry-After); other 4xx are not; an
 * answer that is not JSON or does not match `produces` is `llm.invalid_output`
 * (not retryable: a step `on_failure: "retry"` re-runs the task if wanted).
 * The SDK's own retries are off: retrying is the action's `retry_policy`.
 */
export const llmAction: ActionHandler<"llm"> = {
  async run(action, input, context) {
    const { prompt, model } = action.implementation;
    const credentials = model.api_key === undefined ? undefined : resolveSecretsTracked(model.api_key, context.env);
    const secrets = credentials?.secrets ?? [];
    const languageModel = createLanguageModel(model, credentials?.value, context);
    const settings = toCallSettings(model);
    const produces = prompt.produces;
    const messages = renderMessages(prompt, input);
    context.note?.({ provider: model.provider, model: model.model_id, messages: await recordable(messages) });
    try {
      const result = await generateText({
        model: languageModel,
        messages,
        // Prompt messages come from definitions, not from run data: their roles are trusted.
        allowSystemInMessages: true,
        maxRetries: 0,
        abortSignal: context.signal,
        ...settings,
        ...(produces === undefined
          ? {}
          : {
              output: Output.object({
                schema: jsonSchema(produces === true ? {} : produces === false ? { not: {} } : produces),
              }),
            }),
      });
      const meta = toMeta(result.totalUsage, model);
      context.note?.({ ...meta, finish_reason: result.finishReason, answer: await recordable(result.text) });
      try {
        const answer: JsonObject =
          produces === undefined ? { content: result.text } : checkAnswer(result.output, result.text, produces, model);
        return { ...answer, _meta: meta };
      } catch (thrown) {
        // The model answered, just not what was asked: its tokens were spent all the same.
        throw thrown instanceof EngineError ? thrown.withMeta(meta) : thrown;
      }
    } catch (thrown) {
      throw toLlmError(thrown, model, secrets, context.signal);
    }
  },
};

/** A prompt message as sent: its role and its rendered text (JSON, so the call record can keep it). */
type RenderedMessage = { role: ResolvedPrompt["messages"][number]["role"]; content: string };

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

const PROVIDER_OPTIONS_KEY: Record<ResolvedModel["provider"], string> = {
  "openai": "openai",
  "anthropic": "anthropic",
  "openai-compatible": "openaiCompatible",
  "workers-ai": "workers-ai",
};

function toCallSettings(model: ResolvedModel): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  const providerOptions: JsonObject = {};
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

/** The parsed answer, checked against `produces` with the engine's validator (the SDK only parses it). */
function checkAnswer(
  parsed: unknown,
  text: string,
  produces: NonNullable<ResolvedPrompt["produces"]>,
  model: ResolvedModel,
): JsonObject {
  const problems = validateJson(produces, parsed, "answer");
  if (problems.length > 0 || parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    const why =
      problems.length > 0
        ? problems.map((problem) => `${problem.path}: ${problem.message}`).join("; ")
        : "it is not a JSON object";
    throw EngineError.terminal(
      "llm.invalid_output",
      `the answer of model ${model.id} does not match the prompt's "produces" schema (${why}); the model answered: ${quote(text)}`,
    );
  }
  return parsed as JsonObject;
}

/** Tokens and cost; `pricing` is in US dollars per million tokens. */
function toMeta(usage: LanguageModelUsage, model: ResolvedModel): JsonObject {
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
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
  if (NoObjectGeneratedError.isInstance(thrown)) {
    const error = EngineError.terminal(
      "llm.invalid_output",
      scrub(
        `the answer of model ${model.id} is not the JSON the prompt's "produces" asks for; the model answered: ${quote(thrown.text ?? "")}`,
      ),
    );
    return thrown.usage === undefined ? error : error.withMeta(toMeta(thrown.usage, model));
  }
  if (APICallError.isInstance(thrown)) {
    const status = thrown.statusCode;
    const detail = scrub(
      `${model.provider} model ${model.id} ${status === undefined ? "could not be reached" : `answered ${status}`}: ${thrown.message}`,
    );
    if (status === undefined) {
      return EngineError.retryable("llm.network", detail);
    }
    if (status === 429 || status >= 500) {
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
