import { afterAll, beforeAll, describe, it } from "vitest";
import { startLlmServer, type LlmServer } from "../../scripts/lib/llm-server.mjs";
import { valueFromSchema } from "../../scripts/lib/llm-answers.mjs";

let server: LlmServer;

beforeAll(async () => {
  server = await startLlmServer({ port: 0 });
});

afterAll(async () => {
  await server.close();
});

async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any }> {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, json: await response.json() };
}

const SCHEMA = {
  type: "object",
  properties: {
    title: { type: "string" },
    count: { type: "integer" },
    ok: { type: "boolean" },
    tags: { type: "array", items: { enum: ["a", "b"] } },
  },
};

describe("the local LLM server", () => {
  it("answers OpenAI chat completions with an echo and word-count usage", async ({ expect }) => {
    const { status, json } = await post("/v1/chat/completions", {
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hello there" },
      ],
    });
    expect(status).toBe(200);
    expect(json.choices[0].message).toEqual({ role: "assistant", content: "Echo: hello there" });
    expect(json.usage).toEqual({ prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
  });

  it("builds structured answers from a json_schema response format and from a forced function", async ({ expect }) => {
    const format = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "two words" }],
      response_format: { type: "json_schema", json_schema: { name: "x", schema: SCHEMA } },
    });
    expect(JSON.parse(format.json.choices[0].message.content)).toEqual({
      title: "two words",
      count: 2,
      ok: true,
      tags: ["a"],
    });
    const tool = await post("/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "q" }],
      tools: [{ type: "function", function: { name: "json", parameters: SCHEMA } }],
      tool_choice: "required",
    });
    expect(tool.json.choices[0].message.tool_calls[0].function.name).toBe("json");
    expect(JSON.parse(tool.json.choices[0].message.tool_calls[0].function.arguments)).toMatchObject({
      title: "q",
      count: 1,
    });
  });

  it("answers Anthropic messages as text, through output_config, and through a forced tool", async ({ expect }) => {
    const messages = [{ role: "user", content: [{ type: "text", text: "sea air" }] }];
    const text = await post("/v1/messages", { model: "c", system: "Be kind.", messages });
    expect(text.json).toMatchObject({
      type: "message",
      content: [{ type: "text", text: "Echo: sea air" }],
      usage: { input_tokens: 4, output_tokens: 3 },
    });
    const native = await post("/v1/messages", {
      model: "c",
      messages,
      output_config: { format: { type: "json_schema", schema: SCHEMA } },
    });
    expect(JSON.parse(native.json.content[0].text)).toMatchObject({ title: "sea air", count: 2 });
    const tool = await post("/v1/messages", {
      model: "c",
      messages,
      tools: [{ name: "json", input_schema: SCHEMA }],
      tool_choice: { type: "any" },
    });
    expect(tool.json.content[0]).toMatchObject({ type: "tool_use", name: "json", input: { title: "sea air" } });
    expect(tool.json.stop_reason).toBe("tool_use");
  });

  it("fails on demand, counts requests per key and records the credentials they carried", async ({ expect }) => {
    const ask = (marker: string) =>
      post(
        "/v1/chat/completions",
        { model: "m", messages: [{ role: "user", content: `hi ${marker}` }] },
        { authorization: "Bearer k1" },
      );
    const first = await ask("[[key:n1]] [[fail:429]] [[times:1]] [[retry-after:2]]");
    expect(first.status).toBe(429);
    expect(first.headers.get("retry-after")).toBe("2");
    expect((await ask("[[key:n1]] [[fail:429]] [[times:1]]")).status).toBe(200);
    expect(server.hits("n1")).toBe(2);
    expect(await (await fetch(`${server.url}/seen/n1`)).json()).toEqual({
      key: "n1",
      count: 2,
      credentials: ["Bearer k1", "Bearer k1"],
    });
    const echoed = await ask("[[echo-credential]]");
    expect(echoed.status).toBe(401);
    expect(echoed.json.error.message).toBe("Incorrect API key provided: Bearer k1");
  });

  it("answers invalid JSON or the wrong shape when asked to, and refuses streaming", async ({ expect }) => {
    const format = { type: "json_schema", json_schema: { name: "x", schema: SCHEMA } };
    const invalid = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x [[invalid-json]]" }],
      response_format: format,
    });
    expect(() => JSON.parse(invalid.json.choices[0].message.content)).toThrow();
    const wrong = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x [[wrong-shape]]" }],
      response_format: format,
    });
    expect(JSON.parse(wrong.json.choices[0].message.content)).toEqual({ unexpected: true });
    expect((await post("/v1/chat/completions", { model: "m", stream: true, messages: [] })).status).toBe(400);
  });

  it("builds values for const, anyOf and nested schemas", ({ expect }) => {
    expect(valueFromSchema({ anyOf: [{ const: 7 }, { type: "string" }] }, "q")).toBe(7);
    expect(valueFromSchema({ type: "object", properties: { inner: { type: ["null", "number"] } } }, "a b c")).toEqual({
      inner: 3,
    });
  });
});

async function script(key: string, turns: unknown[]): ReturnType<typeof post> {
  return post(`/scripts/${key}`, { turns });
}

/** A request as `GET /requests/:key` lists it: the model, the messages normalized, and what it offered. */
interface RecordedRequest {
  model: string;
  messages: unknown[];
  tools?: string[];
  tool_choice?: unknown;
  parallel_tool_calls?: boolean;
}

async function requestsOf(key: string): Promise<RecordedRequest[]> {
  const answer = (await (await fetch(`${server.url}/requests/${key}`)).json()) as { requests: RecordedRequest[] };
  return answer.requests;
}

const LOOKUP_TOOL = { type: "object", properties: { id: { type: "string" } }, required: ["id"] };

/** A conversation in OpenAI's format: the user's question, then one assistant tool call and its result per round. */
function openAiConversation(question: string, rounds: number) {
  const messages: unknown[] = [{ role: "user", content: question }];
  for (let i = 0; i < rounds; i++) {
    messages.push(
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `c${i}`, type: "function", function: { name: "lookup", arguments: `{"id":"T-${i}"}` } }],
      },
      { role: "tool", tool_call_id: `c${i}`, content: `{"found":${i}} [[fail:500]]` },
    );
  }
  return {
    model: "m",
    messages,
    tools: [{ type: "function", function: { name: "lookup", parameters: LOOKUP_TOOL } }],
    tool_choice: "auto",
    parallel_tool_calls: false,
  };
}

/** The same conversation in Anthropic's format: tool results are blocks of a user message. */
function anthropicConversation(question: string, rounds: number) {
  const messages: unknown[] = [{ role: "user", content: [{ type: "text", text: question }] }];
  for (let i = 0; i < rounds; i++) {
    messages.push(
      { role: "assistant", content: [{ type: "tool_use", id: `c${i}`, name: "lookup", input: { id: `T-${i}` } }] },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: `c${i}`, content: `{"found":${i}} [[fail:500]]` }],
      },
    );
  }
  return {
    model: "c",
    max_tokens: 100,
    messages,
    tools: [{ name: "lookup", input_schema: LOOKUP_TOOL }],
    tool_choice: { type: "auto", disable_parallel_tool_use: true },
  };
}

const LOOKUP_SCRIPT = [
  {
    tool_calls: [
      { name: "lookup", input: { id: "T-1" } },
      { name: "lookup", input: { id: "T-2" } },
    ],
  },
  { tool_calls: [{ name: "lookup", input: { id: "T-3" }, id: "mine" }] },
  { text: "All looked up." },
];

describe("scripted conversations", () => {
  it("answers OpenAI requests with the scripted turn at the number of assistant messages, tool calls as tool_calls", async ({
    expect,
  }) => {
    const key = "s-openai";
    expect((await script(key, LOOKUP_SCRIPT)).json).toEqual({ key, turns: 3 });
    const first = await post("/v1/chat/completions", openAiConversation(`look [[script:${key}]]`, 0));
    expect(first.status).toBe(200);
    expect(first.json.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_0_0", type: "function", function: { name: "lookup", arguments: '{"id":"T-1"}' } },
          { id: "call_0_1", type: "function", function: { name: "lookup", arguments: '{"id":"T-2"}' } },
        ],
      },
      finish_reason: "tool_calls",
    });
    // Tokens: the question (1 word, the marker removed) in; each call's arguments (1 word each) out.
    expect(first.json.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    // The marker [[fail:500]] inside the tool results is not read.
    const second = await post("/v1/chat/completions", openAiConversation(`look [[script:${key}]]`, 1));
    expect(second.status).toBe(200);
    expect(second.json.choices[0].message.tool_calls).toEqual([
      { id: "mine", type: "function", function: { name: "lookup", arguments: '{"id":"T-3"}' } },
    ]);
    const third = await post("/v1/chat/completions", openAiConversation(`look [[script:${key}]]`, 2));
    expect(third.json.choices[0]).toMatchObject({
      message: { role: "assistant", content: "All looked up." },
      finish_reason: "stop",
    });
    // A replayed turn gets the same answer.
    const replayed = await post("/v1/chat/completions", openAiConversation(`look [[script:${key}]]`, 0));
    expect(replayed.json.choices[0]).toEqual(first.json.choices[0]);
    expect(server.hits(key)).toBe(4);
  });

  it("answers Anthropic requests with tool_use blocks and stop_reason tool_use, reading the turn the same way", async ({
    expect,
  }) => {
    const key = "s-anthropic";
    await script(key, LOOKUP_SCRIPT);
    const first = await post("/v1/messages", anthropicConversation(`look [[script:${key}]]`, 0));
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      content: [
        { type: "tool_use", id: "toolu_0_0", name: "lookup", input: { id: "T-1" } },
        { type: "tool_use", id: "toolu_0_1", name: "lookup", input: { id: "T-2" } },
      ],
      stop_reason: "tool_use",
      usage: { input_tokens: 1, output_tokens: 2 },
    });
    const second = await post("/v1/messages", anthropicConversation(`look [[script:${key}]]`, 1));
    expect(second.status).toBe(200);
    expect(second.json.content).toEqual([{ type: "tool_use", id: "mine", name: "lookup", input: { id: "T-3" } }]);
    const third = await post("/v1/messages", anthropicConversation(`look [[script:${key}]]`, 2));
    expect(third.json).toMatchObject({ content: [{ type: "text", text: "All looked up." }], stop_reason: "end_turn" });
  });

  it("answers a scripted json turn as text, or as the forced tool's input in either format, and a scripted failure", async ({
    expect,
  }) => {
    const key = "s-json";
    await script(key, [{ json: { title: "scripted" } }, { fail: 503 }]);
    const ask = `q [[script:${key}]]`;
    const text = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: ask }],
      response_format: { type: "json_schema", json_schema: { name: "x", schema: SCHEMA } },
    });
    expect(JSON.parse(text.json.choices[0].message.content)).toEqual({ title: "scripted" });
    const forcedOpenAi = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: ask }],
      tools: [{ type: "function", function: { name: "json", parameters: SCHEMA } }],
      tool_choice: "required",
    });
    expect(forcedOpenAi.json.choices[0].message.tool_calls[0].function).toEqual({
      name: "json",
      arguments: '{"title":"scripted"}',
    });
    const forcedAnthropic = await post("/v1/messages", {
      model: "c",
      messages: [{ role: "user", content: [{ type: "text", text: ask }] }],
      tools: [{ name: "json", input_schema: SCHEMA }],
      tool_choice: { type: "any" },
    });
    expect(forcedAnthropic.json.content).toEqual([
      { type: "tool_use", id: "toolu_0_0", name: "json", input: { title: "scripted" } },
    ]);
    const failed = await post("/v1/messages", {
      model: "c",
      messages: [
        { role: "user", content: ask },
        { role: "assistant", content: "earlier" },
        { role: "user", content: "again" },
      ],
    });
    expect(failed.status).toBe(503);
    expect(failed.json).toMatchObject({ type: "error", error: { type: "api_error" } });
  });

  it("refuses a malformed script, an unknown one and a turn past its end, naming the problem", async ({ expect }) => {
    const bad = await script("s-bad", [{ text: "ok" }, { text: "a", json: 1 }]);
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toBe("turns.1: a turn has exactly one of tool_calls, text, json, fail");
    const badCall = await script("s-bad", [{ tool_calls: [{ name: "x", input: "not an object" }] }]);
    expect(badCall.json.error.message).toBe(
      "turns.0: tool_calls.0 must be { name: string, input: object, id?: string }",
    );
    expect((await post("/scripts/s-bad", { turns: [], extra: 1 })).status).toBe(400);
    const unknown = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "[[script:s-never]]" }],
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toMatch(/no script s-never was posted/);
    await script("s-short", [{ text: "only" }]);
    const past = await post("/v1/chat/completions", {
      model: "m",
      messages: [
        { role: "user", content: "[[script:s-short]]" },
        { role: "assistant", content: "only" },
        { role: "user", content: "more" },
      ],
    });
    expect(past.status).toBe(400);
    expect(past.json.error.message).toMatch(/script s-short has 1 turns; .* asks for turn 1/);
  });
});

describe("markers across the conversation", () => {
  it("reads markers from every user message, the first occurrence winning, in both formats", async ({ expect }) => {
    const format = { type: "json_schema", json_schema: { name: "x", schema: SCHEMA } };
    // A repair-style follow-up: the marker of the first user message still holds.
    const openAi = await post("/v1/chat/completions", {
      model: "m",
      messages: [
        { role: "user", content: [{ type: "text", text: "x [[key:m-first]] [[wrong-shape]]" }] },
        { role: "assistant", content: '{"unexpected":true}' },
        { role: "user", content: "Try again [[key:m-second]]" },
      ],
      response_format: format,
    });
    expect(JSON.parse(openAi.json.choices[0].message.content)).toEqual({ unexpected: true });
    expect(server.hits("m-first")).toBe(1);
    expect(server.hits("m-second")).toBe(0);
    const anthropic = await post("/v1/messages", {
      model: "c",
      messages: [
        { role: "user", content: [{ type: "text", text: "x [[key:m-first]]" }] },
        { role: "assistant", content: [{ type: "text", text: "hm" }] },
        { role: "user", content: [{ type: "text", text: "y [[fail:429]]" }] },
      ],
    });
    expect(anthropic.status).toBe(429);
    expect(server.hits("m-first")).toBe(2);
  });

  it("does not read markers in tool results, OpenAI tool messages or Anthropic tool_result blocks", async ({
    expect,
  }) => {
    await script("m-tools", [{ text: "a" }, { text: "b" }, { text: "done" }]);
    const openAi = await post("/v1/chat/completions", openAiConversation("go [[script:m-tools]]", 2));
    expect(openAi.status).toBe(200);
    expect(openAi.json.choices[0].message.content).toBe("done");
    const anthropic = await post("/v1/messages", anthropicConversation("go [[script:m-tools]]", 2));
    expect(anthropic.status).toBe(200);
    expect(anthropic.json.content).toEqual([{ type: "text", text: "done" }]);
  });

  it("fails only the model a fail-model marker names, in both formats", async ({ expect }) => {
    const ask = (path: string, model: string) =>
      post(path, {
        model,
        messages: [{ role: "user", content: "hi [[fail-model:primary-1:503]] [[fail-model:other:429]]" }],
      });
    const primary = await ask("/v1/chat/completions", "primary-1");
    expect(primary.status).toBe(503);
    expect(primary.json.error.message).toBe("model primary-1 is failing on purpose");
    expect((await ask("/v1/chat/completions", "other")).status).toBe(429);
    expect((await ask("/v1/chat/completions", "fallback")).status).toBe(200);
    const claude = await ask("/v1/messages", "primary-1");
    expect(claude.status).toBe(503);
    expect(claude.json).toMatchObject({ type: "error", error: { type: "api_error" } });
    expect((await ask("/v1/messages", "fallback")).json.content).toEqual([{ type: "text", text: "Echo: hi" }]);
  });
});

describe("slow models", () => {
  it("answers a model a slow-model marker names only after its delay, and others at once", async ({ expect }) => {
    const ask = async (model: string) => {
      const started = Date.now();
      const response = await post("/v1/chat/completions", {
        model,
        messages: [{ role: "user", content: "hi [[slow-model:sleepy:300]]" }],
      });
      return { status: response.status, ms: Date.now() - started };
    };
    const slow = await ask("sleepy");
    expect(slow.status).toBe(200);
    expect(slow.ms).toBeGreaterThanOrEqual(290);
    expect((await ask("awake")).ms).toBeLessThan(250);
  });
});

describe("the requests a key saw", () => {
  it("lists each request's messages normalized alike from both formats, with the tool options sent", async ({
    expect,
  }) => {
    await script("r-openai", [{ text: "a" }, { text: "b" }]);
    await script("r-anthropic", [{ text: "a" }, { text: "b" }]);
    await post("/v1/chat/completions", openAiConversation("find [[script:r-openai]]", 1));
    await post("/v1/messages", anthropicConversation("find [[script:r-anthropic]]", 1));
    const messages = (marker: string) => [
      { role: "user", text: `find ${marker}` },
      { role: "assistant", text: "", tool_calls: [{ id: "c0", name: "lookup", input: { id: "T-0" } }] },
      { role: "tool", text: "", tool_results: [{ id: "c0", content: '{"found":0} [[fail:500]]' }] },
    ];
    const [openAi] = await requestsOf("r-openai");
    expect(openAi).toEqual({
      model: "m",
      messages: messages("[[script:r-openai]]"),
      tools: ["lookup"],
      tool_choice: "auto",
      parallel_tool_calls: false,
    });
    const [anthropic] = await requestsOf("r-anthropic");
    expect(anthropic).toEqual({
      model: "c",
      messages: messages("[[script:r-anthropic]]"),
      tools: ["lookup"],
      tool_choice: { type: "auto", disable_parallel_tool_use: true },
    });
    // An error result is marked so; a user text beside tool results stays a user message.
    await post("/v1/messages", {
      model: "c",
      messages: [
        { role: "user", content: "q [[key:r-error]]" },
        { role: "assistant", content: [{ type: "tool_use", id: "c9", name: "lookup", input: {} }] },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "c9", is_error: true, content: [{ type: "text", text: "denied" }] },
            { type: "text", text: "go on" },
          ],
        },
      ],
    });
    expect((await requestsOf("r-error"))[0]?.messages.slice(2)).toEqual([
      { role: "tool", text: "", tool_results: [{ id: "c9", content: "denied", is_error: true }] },
      { role: "user", text: "go on" },
    ]);
    expect(await requestsOf("r-never")).toEqual([]);
  });
});

describe("tools used without a script", () => {
  const PAGE_TOOL = {
    type: "object",
    properties: { team: { enum: ["ops", "dev"] }, urgent: { type: "boolean" } },
  };
  const openAiTools = [
    { type: "function", function: { name: "lookup", parameters: LOOKUP_TOOL } },
    { type: "function", function: { name: "page", parameters: PAGE_TOOL } },
    { type: "function", function: { name: "noop", parameters: { type: "object" } } },
  ];
  const anthropicTools = [
    { name: "lookup", input_schema: LOOKUP_TOOL },
    { name: "page", input_schema: PAGE_TOOL },
    { name: "noop", input_schema: { type: "object" } },
  ];

  it("calls every offered tool once on the first turn, inputs built from their schemas, then answers", async ({
    expect,
  }) => {
    const first = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "ticket T-7 [[use-tools]]" }],
      tools: openAiTools,
    });
    expect(first.status).toBe(200);
    expect(first.json.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_0_0", type: "function", function: { name: "lookup", arguments: '{"id":"ticket T-7"}' } },
          { id: "call_0_1", type: "function", function: { name: "page", arguments: '{"team":"ops","urgent":true}' } },
          { id: "call_0_2", type: "function", function: { name: "noop", arguments: "{}" } },
        ],
      },
      finish_reason: "tool_calls",
    });
    // With an assistant message in the conversation: the usual answer, here JSON from the response format.
    const later = await post("/v1/chat/completions", {
      ...openAiConversation("ticket T-7 [[use-tools]]", 1),
      response_format: { type: "json_schema", json_schema: { name: "x", schema: SCHEMA } },
    });
    expect(later.json.choices[0].finish_reason).toBe("stop");
    expect(JSON.parse(later.json.choices[0].message.content)).toEqual({
      title: "ticket T-7",
      count: 2,
      ok: true,
      tags: ["a"],
    });
    const text = await post("/v1/chat/completions", openAiConversation("ticket T-7 [[use-tools]]", 1));
    expect(text.json.choices[0].message).toEqual({ role: "assistant", content: "Echo: ticket T-7" });
  });

  it("calls only the tools named, in their order, as Anthropic tool_use blocks, then answers", async ({ expect }) => {
    const first = await post("/v1/messages", {
      model: "c",
      max_tokens: 100,
      messages: [{ role: "user", content: [{ type: "text", text: "ticket T-7 [[use-tools:page,lookup]]" }] }],
      tools: anthropicTools,
    });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      content: [
        { type: "tool_use", id: "toolu_0_0", name: "page", input: { team: "ops", urgent: true } },
        { type: "tool_use", id: "toolu_0_1", name: "lookup", input: { id: "ticket T-7" } },
      ],
      stop_reason: "tool_use",
    });
    const later = await post("/v1/messages", anthropicConversation("ticket T-7 [[use-tools:page,lookup]]", 1));
    expect(later.json).toMatchObject({
      content: [{ type: "text", text: "Echo: ticket T-7" }],
      stop_reason: "end_turn",
    });
  });

  it("does not call a forced tool, answers with it when nothing else is offered, and refuses a name not offered", async ({
    expect,
  }) => {
    // The AI SDK's structured output through a forced `json` tool: the other tools are called first.
    const forced = await post("/v1/messages", {
      model: "c",
      max_tokens: 100,
      messages: [{ role: "user", content: "q [[use-tools]]" }],
      tools: [{ name: "json", input_schema: SCHEMA }, ...anthropicTools.slice(0, 1)],
      tool_choice: { type: "tool", name: "json" },
    });
    expect(forced.json.content).toEqual([{ type: "tool_use", id: "toolu_0_0", name: "lookup", input: { id: "q" } }]);
    const alone = await post("/v1/messages", {
      model: "c",
      max_tokens: 100,
      messages: [{ role: "user", content: "q [[use-tools]]" }],
      tools: [{ name: "json", input_schema: SCHEMA }],
      tool_choice: { type: "tool", name: "json" },
    });
    expect(alone.json.content).toMatchObject([{ type: "tool_use", name: "json", input: { title: "q", count: 1 } }]);
    const none = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "q [[use-tools]]" }],
    });
    expect(none.json.choices[0].message).toEqual({ role: "assistant", content: "Echo: q" });
    const unknown = await post("/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "q [[use-tools:lookup,missing]]" }],
      tools: openAiTools,
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toBe(
      "[[use-tools]] names missing, which this request does not offer (offered: lookup, page, noop)",
    );
  });
});
