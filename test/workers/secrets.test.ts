import { env, exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import { declaredSecretNames, scrubbedSecretValues, scrubSecrets } from "../../lib/secrets.ts";
import { resolveSecrets } from "../../executor/secrets.ts";
import { TEST_SECRETS } from "../secrets.ts";
import { TOKEN, api, uniqueId, httpTarget, singleTaskWorkflow, llmServer, mcpServer, runWorkflow } from "./helpers.ts";

const bindings = env as unknown as Record<string, string>;

/** An http step that sends `headers` to `url`, its whole output landing at `output.call`. */
function httpStep(url: string, headers: Record<string, string>, step: Record<string, unknown> = {}) {
  return {
    ref: "call",
    action: { kind: "http", implementation: { method: "GET", url_template: url, headers } },
    output_mapping: { "output.call": "$" },
    ...step,
  };
}

/** The journal, the run view and the whole event stream of a finished run, as text. */
async function everythingSeen(runId: string): Promise<string[]> {
  const journal = JSON.stringify((await api("GET", `/v1/runs/${runId}/journal`)).json);
  const view = JSON.stringify((await api("GET", `/v1/runs/${runId}`)).json);
  const events = await (
    await exports.default.fetch(`http://trellis.test/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
  ).text();
  return [journal, view, events];
}

/** Every secret the test Worker holds: none may ever be seen. */
const ALL_SECRETS = (): string[] => [
  TEST_SECRETS.LLM_API_KEY,
  TEST_SECRETS.MCP_TOKEN,
  bindings.JOURNAL_SIGNING_KEY ?? "",
  bindings.SHELL_SERVER_TOKEN ?? "",
  "test-token",
  "second-token",
];

describe("which secrets a definition may name", () => {
  it("refuses the engine's own secrets and undeclared names at registration, naming each path", async ({ expect }) => {
    const id = uniqueId("steal");
    const response = await api("POST", "/v1/definitions", {
      workflows: [
        singleTaskWorkflow(id, [
          httpStep(`${httpTarget()}/echo`, {
            "x-api-key": "$env:JOURNAL_SIGNING_KEY",
            "authorization": "Bearer $env:API_TOKENS",
          }),
        ]),
      ],
      models: [
        {
          id: uniqueId("m"),
          provider: "openai-compatible",
          model_id: "x",
          base_url: llmServer(),
          api_key: "$env:SHELL_SERVER_TOKEN",
        },
      ],
      mcp_servers: [
        {
          id: uniqueId("s"),
          url: mcpServer(),
          headers: { "x-token": "$env:NOT_DECLARED", "authorization": "Bearer $env:MCP_TOKEN" },
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("definition.invalid");
    const problems = response.json.error.details.filter(
      (detail: { code: string }) => detail.code === "definition.undeclared_secret",
    );
    expect(problems.map((detail: { path: string }) => detail.path).sort()).toEqual(
      [
        "mcp_servers.0.headers.x-token",
        "models.0.api_key",
        "workflows.0.nodes.main.task.steps.0.action.implementation.headers.authorization",
        "workflows.0.nodes.main.task.steps.0.action.implementation.headers.x-api-key",
      ].sort(),
    );
    const messages = problems.map((detail: { message: string }) => detail.message).join("\n");
    expect(messages).toContain("$env:JOURNAL_SIGNING_KEY is the engine's own configuration");
    expect(messages).toContain("$env:NOT_DECLARED is not a declared workflow secret or var");
    // The declared MCP_TOKEN in the same bundle is not a problem.
    expect(messages).not.toContain("MCP_TOKEN");
  });

  it("resolves a declared var in a url_template, a model's base_url and an MCP server's url, and keeps it readable", async ({
    expect,
  }) => {
    const server = uniqueId("srv");
    const model = uniqueId("model");
    const run = await runWorkflow(
      singleTaskWorkflow(
        uniqueId("vars"),
        [
          httpStep("$env:HTTP_TARGET_URL/echo/{{who}}", {}, { input_mapping: { who: "$.input.who" } }),
          {
            ref: "ask",
            action: {
              kind: "llm",
              implementation: { prompt: { messages: [{ role: "user", template: "Hi" }] }, model },
            },
            output_mapping: { "output.ask": "$.content" },
          },
          {
            ref: "echo",
            action: { kind: "mcp", implementation: { server, tool: "echo" } },
            input_mapping: { message: "$.input.who" },
            output_mapping: { "output.echo": "$.content[0].text" },
          },
        ],
        { tools: [`mcp:${server}/echo`] },
      ),
      { who: "ada" },
      {
        models: [
          { id: model, provider: "openai-compatible", model_id: "local-echo", base_url: "$env:LLM_SERVER_URL/v1" },
        ],
        mcp_servers: [{ id: server, url: "$env:MCP_SERVER_URL/mcp" }],
      },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.call.body.path).toBe("/echo/ada");
    expect(run.output.result.ask).toBe("Echo: Hi");
    expect(run.output.result.echo).toBe("Echo: ada");
    // A var is configuration, not a secret: the URL is on record as it was called.
    const [journal] = await everythingSeen(run.run_id);
    expect(journal).toContain(`${httpTarget()}/echo/ada`);
  });

  it("never lets run data name a var: a value that reads $env:NAME is sent as text", async ({ expect }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("inject"), [
        httpStep("{{base}}/echo", {}, { input_mapping: { base: "$.input.base" } }),
      ]),
      { base: "$env:HTTP_TARGET_URL" },
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("http.bad_url");
  });

  it("refuses a var the deployment does not declare, and an engine name, in a url", async ({ expect }) => {
    const problems = async (urls: string[]) => {
      const response = await api("POST", "/v1/definitions", {
        mcp_servers: urls.map((url) => ({ id: uniqueId("s"), url })),
      });
      expect(response.status).toBe(400);
      return response.json.error.details.map(
        (detail: { path: string; code: string }) => `${detail.path} ${detail.code}`,
      );
    };
    expect((await problems(["$env:NOT_DECLARED/mcp", "$env:SHELL_SERVER_URL"])).sort()).toEqual([
      "mcp_servers.0.url definition.undeclared_secret",
      "mcp_servers.1.url definition.undeclared_secret",
    ]);
    expect(await problems(["not a url", "$env:lower/x"])).toEqual([
      "mcp_servers.0.url schema.invalid_format",
      "mcp_servers.1.url schema.invalid_format",
    ]);
  });

  it("never resolves the engine's own secrets at call time, even when WORKFLOW_SECRETS or WORKFLOW_VARS lists them", ({
    expect,
  }) => {
    const hostile = {
      ...bindings,
      WORKFLOW_SECRETS: "JOURNAL_SIGNING_KEY, API_TOKENS, SHELL_SERVER_TOKEN, LLM_API_KEY",
      WORKFLOW_VARS: "SHELL_SERVER_URL, CONTAINER_MODE",
    } as unknown as Env;
    expect([...declaredSecretNames(hostile)]).toEqual(["LLM_API_KEY"]);
    for (const name of [
      "JOURNAL_SIGNING_KEY",
      "API_TOKENS",
      "SHELL_SERVER_TOKEN",
      "SHELL_SERVER_URL",
      "NOT_DECLARED",
    ]) {
      let thrown: unknown;
      try {
        resolveSecrets(`Bearer $env:${name}`, hostile);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(EngineError);
      expect((thrown as EngineError).code).toBe("secret.not_declared");
      expect((thrown as EngineError).message).not.toContain(bindings[name] ?? "?");
    }
    expect(resolveSecrets("Bearer $env:LLM_API_KEY", hostile)).toBe(`Bearer ${TEST_SECRETS.LLM_API_KEY}`);
  });

  it("fails the step with secret.missing when a declared secret has no value", async ({ expect }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("unset"), [
        httpStep(`${httpTarget()}/echo`, { authorization: "Bearer $env:UNSET_SECRET" }),
      ]),
    );
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "secret.missing", step: "call" });
  });
});

describe("scrubbing secrets from what a task reports", () => {
  it("scrubs a credential that a peer echoes in a successful answer from the output, the journal and the events", async ({
    expect,
  }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("echo"), [httpStep(`${httpTarget()}/echo`, { "x-api-key": "$env:LLM_API_KEY" })]),
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.call.body.headers["x-api-key"]).toBe("[redacted]");
    for (const text of await everythingSeen(run.run_id)) {
      for (const secret of ALL_SECRETS()) {
        expect(text).not.toContain(secret);
      }
    }
  });

  it("scrubs a credential quoted by http.invalid_json from the error, the journal and the events", async ({
    expect,
  }) => {
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("broken"), [
        httpStep(`${httpTarget()}/broken-json`, { "x-api-key": "$env:LLM_API_KEY" }),
      ]),
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("http.invalid_json");
    expect(run.error.message).toContain('"x-api-key":"[redacted]"');
    for (const text of await everythingSeen(run.run_id)) {
      expect(text).not.toContain(TEST_SECRETS.LLM_API_KEY);
    }
  });

  it("scrubs a credential quoted by llm.invalid_output, and one echoed in a plain answer", async ({ expect }) => {
    const model = {
      provider: "openai-compatible",
      model_id: "local-echo",
      base_url: `${llmServer()}/v1`,
      api_key: "$env:LLM_API_KEY",
    };
    const prompt = (produces: boolean) => ({
      messages: [{ role: "user", template: "Tell me [[echo-credential:answer]]" }],
      ...(produces ? { produces: { type: "object", required: ["a"], properties: { a: { type: "string" } } } } : {}),
    });
    const failed = await runWorkflow(
      singleTaskWorkflow(uniqueId("llmbad"), [
        { ref: "ask", action: { kind: "llm", implementation: { prompt: prompt(true), model } } },
      ]),
    );
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("llm.invalid_output");
    expect(failed.error.message).toContain("(credential: Bearer [redacted])");
    const answered = await runWorkflow(
      singleTaskWorkflow(uniqueId("llmok"), [
        {
          ref: "ask",
          action: { kind: "llm", implementation: { prompt: prompt(false), model } },
          output_mapping: { "output.answer": "$.content" },
        },
      ]),
    );
    expect(answered.status, JSON.stringify(answered.error)).toBe("completed");
    expect(answered.output.result.answer).toContain("(credential: Bearer [redacted])");
    for (const runId of [failed.run_id, answered.run_id]) {
      for (const text of await everythingSeen(runId)) {
        expect(text).not.toContain(TEST_SECRETS.LLM_API_KEY);
      }
    }
  });

  it("scrubs every string and key however deep, and leaves a value without secrets untouched", ({ expect }) => {
    const secrets = scrubbedSecretValues(bindings);
    expect(secrets).toContain(TEST_SECRETS.LLM_API_KEY);
    expect(secrets).toContain(bindings.JOURNAL_SIGNING_KEY);
    expect(secrets).toContain("second-token");
    const clean = { a: [1, { b: "nothing here" }] };
    expect(scrubSecrets(clean, secrets)).toBe(clean);
    const dirty = { [`k-${TEST_SECRETS.MCP_TOKEN}`]: [{ deep: `x ${TEST_SECRETS.LLM_API_KEY} y` }], __proto__: null };
    expect(JSON.stringify(scrubSecrets(dirty, secrets))).toBe('{"k-[redacted]":[{"deep":"x [redacted] y"}]}');
  });
});
