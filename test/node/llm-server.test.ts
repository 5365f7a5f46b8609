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
