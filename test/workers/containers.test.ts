import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import {
  runOne,
  registerWorkflow,
  api,
  uniqueId,
  waitForRun,
  start,
  runWorkflow,
  journal,
  callOf,
  stepsOf,
} from "./helpers.ts";

/**
 * The container path end to end, in local mode: workflows run through the
 * coordinator and the executor, whose shell and tool actions reach the
 * Sandbox Durable Object, which forwards to the real shell server started by
 * test/global-setup.ts.
 */

const ALL_TOOLS = [
  "tool:read_file",
  "tool:write_file",
  "tool:list_files",
  "tool:delete_file",
  "tool:git_status",
  "tool:git_commit",
  "tool:git_push",
  "tool:git_merge",
  "tool:run_tests",
  "tool:run_lint",
  "tool:run_build",
  "tool:install_packages",
  "tool:update_dependencies",
  "tool:write_artifact",
  "tool:read_artifact",
  "tool:list_artifacts",
];

const shell = (
  ref: string,
  command: string,
  extra: Record<string, unknown> = {},
  step: Record<string, unknown> = {},
) => ({
  ref,
  action: { kind: "shell", implementation: { command_template: command, ...extra } },
  ...step,
});

const tool = (
  ref: string,
  name: string,
  input: Record<string, unknown> = {},
  step: Record<string, unknown> = {},
  action: Record<string, unknown> = {},
) => ({
  ref,
  action: { kind: "tool", implementation: { tool: name }, ...action },
  input_mapping: input,
  ...step,
});

/** A workflow whose nodes share one declared container, bound as `container`. */
function containerWorkflow(
  id: string,
  nodes: Record<string, { steps: unknown[]; depends_on?: string[]; output_mapping?: Record<string, unknown> }>,
  extra: Record<string, unknown> = {},
) {
  return {
    id,
    tools: ALL_TOOLS,
    resources: { dev_env: { type: "container" } },
    nodes: Object.fromEntries(
      Object.entries(nodes).map(([nodeId, node]) => [
        nodeId,
        {
          task: { steps: node.steps },
          resource_bindings: { container: "dev_env" },
          ...(node.depends_on ? { depends_on: node.depends_on } : {}),
          output_mapping: node.output_mapping ?? { [`output.${nodeId}`]: "$" },
        },
      ]),
    ),
    ...extra,
  };
}

/** Sends the executor, as run `runId`, a task whose one shell step runs `command` in `container`. */
async function readAs(
  runId: string,
  container: string,
  command: string,
): Promise<{ success: boolean; error: { code: string; message: string } }> {
  return (await runOne({
    token_id: "t1",
    workflow_run_id: runId,
    workflow_id: "wf",
    workflow_version: 0,
    node_id: "n",
    item_index: null,
    iteration: 1,
    task_id: "t",
    task_version: 0,
    task: {
      id: "t",
      version: 0,
      steps: [
        {
          ref: "read",
          action: { id: "t/read", version: 0, kind: "shell", implementation: { command_template: command } },
        },
      ],
    },
    input: {},
    resources: { container: { type: "container", id: container } },
    timeout_ms: 10_000,
    retry_attempt: 0,
    tools: [],
  })) as { success: boolean; error: { code: string; message: string } };
}

/** Runs `workflow` alone to its end; a container's first start may take a while. */
const run = (workflow: Record<string, unknown>, input: unknown = {}): Promise<any> =>
  runWorkflow(workflow, input, {}, 30_000);

/** A last step that puts the codes of the errors recorded by `on_failure: "continue"` steps at `output.codes`. */
const errorCodes = {
  ref: "codes",
  action: {
    kind: "context",
    implementation: { updates: [{ path: "codes", expr: "input.errors.map(e, e.error.code)" }] },
  },
  input_mapping: { errors: { path: "$.state._errors", default: [] } },
  output_mapping: { "output.codes": "$.codes" },
};

const sandbox = (name: string) =>
  (env.SANDBOX as SandboxNamespace).get((env.SANDBOX as SandboxNamespace).idFromName(name));

describe("a code-change workflow in a container", () => {
  it("writes a file, runs a test command, commits with git and writes an artifact readable after the run and its container are gone", async ({
    expect,
  }) => {
    const id = uniqueId("change");
    const workflow = containerWorkflow(id, {
      change: {
        steps: [
          shell("init", "git init -q -b main ."),
          tool("write", "write_file", { path: "src/hello.txt", content: { template: "hello {{input.name}}\n" } }),
          tool(
            "test",
            "run_tests",
            { command: "grep -q 'hello' src/hello.txt && echo 'tests passed'" },
            { output_mapping: { "state.test": "$" } },
          ),
          tool(
            "commit",
            "git_commit",
            { message: { template: "Add greeting for {{input.name}}" } },
            { output_mapping: { "output.commit": "$.commit", "output.branch": "$.branch" } },
          ),
          tool(
            "report",
            "write_artifact",
            { name: "reports/test.txt", content: "$.state.test.stdout" },
            { output_mapping: { "output.artifact": "$" } },
          ),
        ],
        output_mapping: { "output.commit": "$.commit", "output.branch": "$.branch", "output.artifact": "$.artifact" },
      },
      verify: {
        depends_on: ["change"],
        steps: [
          shell(
            "log",
            "git log --format=%H%n%s -1 && cat src/hello.txt",
            {},
            { output_mapping: { "output.log": "$.stdout" } },
          ),
          tool("status", "git_status", {}, { output_mapping: { "output.clean": "$.clean" } }),
        ],
      },
    });
    const finished = await run(workflow, { name: "Ada" });
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    const commit = finished.output.commit as string;
    expect(commit).toMatch(/^[0-9a-f]{40}$/);
    expect(finished.output.branch).toBe("main");
    // The second node ran in the same container and sees the first node's commit.
    expect(finished.output.verify).toEqual({ log: `${commit}\nAdd greeting for Ada\nhello Ada\n`, clean: true });
    expect(finished.output.artifact).toMatchObject({
      name: "reports/test.txt",
      run_id: finished.run_id,
      key: `runs/${finished.run_id}/artifacts/reports/test.txt`,
      size: "tests passed\n".length,
      content_type: "text/plain; charset=utf-8",
    });

    // The run ended: the coordinator releases its container, which deletes the workspace.
    const container = `${finished.run_id}/dev_env`;
    await vi.waitFor(
      async () => {
        const listed = (await sandbox(container).listFiles({ container, run_id: finished.run_id })) as {
          ok: boolean;
          value?: { entries: unknown[] };
        };
        expect(listed.value?.entries).toEqual([]);
      },
      { timeout: 10_000 },
    );

    // The artifact outlives both: in R2 with its metadata …
    const object = await (env.ARTIFACTS as R2Bucket).get(`runs/${finished.run_id}/artifacts/reports/test.txt`);
    expect(await object?.text()).toBe("tests passed\n");
    expect(object?.customMetadata).toMatchObject({
      run_id: finished.run_id,
      node_id: "change",
      name: "reports/test.txt",
    });

    // … but not to another run that is not family.
    const readerId = uniqueId("reader");
    const reader = await run(
      {
        id: readerId,
        tools: ["tool:read_artifact", "tool:list_artifacts"],
        nodes: {
          read: {
            task: {
              steps: [
                tool(
                  "get",
                  "read_artifact",
                  { name: "reports/test.txt", run_id: "$.input.run_id" },
                  { output_mapping: { "output.content": "$.content", "output.size": "$.size" } },
                ),
                tool(
                  "list",
                  "list_artifacts",
                  { run_id: "$.input.run_id" },
                  { output_mapping: { "output.names": "$.artifacts[*].name" } },
                ),
              ],
            },
            output_mapping: { "output.read": "$" },
          },
        },
      },
      { run_id: finished.run_id },
    );
    // The reader is neither the writer's parent nor its child: the artifact reads as missing and lists as nothing.
    expect(reader.status).toBe("failed");
    expect(reader.error).toMatchObject({
      code: "tool.artifact_not_found",
      message: expect.stringContaining("that this run may read"),
    });
    expect(JSON.stringify(reader)).not.toContain("tests passed");
  });

  it("refuses a second run in the first run's container, and journals the refused task", async ({ expect }) => {
    const id = uniqueId("owner");
    await registerWorkflow(containerWorkflow(id, { work: { steps: [shell("touch", "echo mine > owned.txt")] } }));
    const first = await waitForRun(await start(id));
    expect(first.status).toBe("completed");

    // A second run, held in drafting; its container is claimed first by the first run
    // (as if a bug or a forged payload sent that run there), then the second run starts.
    const second = await start(id, { input: {}, mode: "approval" });
    const container = `${second}/dev_env`;
    const claimed = (await sandbox(container).exec({ container, run_id: first.run_id, command: "true" })) as {
      ok: boolean;
    };
    expect(claimed.ok).toBe(true);
    expect((await api("POST", `/v1/runs/${second}/approve`)).status).toBe(200);
    const refused = await waitForRun(second);
    expect(refused.status).toBe("failed");
    expect(refused.error).toMatchObject({ code: "container.not_owner", node: "work" });
    const entries: any[] = await journal(second);
    const failedTask = entries.find((entry) => entry.kind === "task.failed");
    expect(failedTask.body.error).toMatchObject({ code: "container.not_owner", retryable: false });
    expect(failedTask.body.error.message).toContain(`belongs to run ${first.run_id}`);
  });

  it("refuses a task whose payload points at another run's container, at the executor", async ({ expect }) => {
    const owner = `run-${crypto.randomUUID()}`;
    const container = `${owner}/dev_env`;
    await sandbox(container).exec({ container, run_id: owner, command: "echo secret > data.txt" });
    const result = await readAs("intruder-run", container, "cat data.txt");
    expect(result.success).toBe(false);
    expect(result.error.code).toBe("container.not_owner");
    expect(result.error.message).not.toContain("secret");
  });
});

describe("containers belong to their run (local mode)", () => {
  const local = env as unknown as { SHELL_SERVER_URL: string };

  /** A run whose container holds a secret file and stays live, waiting at a gate; `finish()` answers the gate. */
  async function startVictim(): Promise<{ runId: string; workspace: string; finish: () => Promise<any> }> {
    const id = uniqueId("victim");
    await registerWorkflow({
      id,
      tools: ALL_TOOLS,
      resources: { dev_env: { type: "container" } },
      nodes: {
        main: {
          task: {
            steps: [
              shell("write", "echo 'the victim secret' > secret.txt"),
              {
                ref: "wait",
                action: {
                  kind: "human",
                  implementation: { prompt_template: "go on?", input_schema: { type: "object" } },
                },
              },
              shell("check", "ls -A && cat secret.txt", {}, { output_mapping: { "output.after": "$.stdout" } }),
            ],
          },
          resource_bindings: { container: "dev_env" },
          output_mapping: { "output.after": "$.after" },
        },
      },
    });
    const runId = await start(id);
    let gateId = "";
    await vi.waitFor(
      async () => {
        const gates = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates;
        if (gates?.length !== 1) {
          throw new Error(`run ${runId} is not waiting at its gate yet`);
        }
        gateId = gates[0].gate_id;
      },
      { timeout: 10_000 },
    );
    return {
      runId,
      workspace: `${local.SHELL_SERVER_URL}/v1/workspaces/${encodeURIComponent(`${runId}/dev_env`)}`,
      finish: async () => {
        await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: {} });
        return waitForRun(runId);
      },
    };
  }

  const attempt = (ref: string, method: string, url: string, headers: Record<string, string> = {}, body?: string) => ({
    ref,
    action: {
      kind: "http",
      implementation: {
        method,
        url_template: "{{{url}}}",
        headers,
        ...(body === undefined ? {} : { body_template: body }),
        response: "text",
      },
    },
    input_mapping: { url },
    on_failure: "continue",
    output_mapping: {},
  });
  const errorMessages = {
    ref: "errors",
    action: {
      kind: "context",
      implementation: {
        updates: [{ path: "errors", expr: "input.errors.map(e, e.step + ' ' + e.error.code + ' ' + e.error.message)" }],
      },
    },
    input_mapping: { errors: { path: "$.state._errors", default: [] } },
    output_mapping: { "output.errors": "$.errors" },
  };

  it("gives a run without a container nothing from the shell server, with no token or a forged one", async ({
    expect,
  }) => {
    const victim = await startVictim();
    const forged = { authorization: "Bearer $env:LLM_API_KEY" };
    const intruder = await run({
      id: uniqueId("intruder"),
      nodes: {
        main: {
          task: {
            steps: [
              attempt("read", "POST", `${victim.workspace}/files/read`, {}, '{"path":"secret.txt"}'),
              attempt("forged_read", "POST", `${victim.workspace}/files/read`, forged, '{"path":"secret.txt"}'),
              attempt("forged_exec", "POST", `${victim.workspace}/exec`, forged, '{"command":"touch pwned"}'),
              attempt("takeover", "PUT", victim.workspace, forged, '{"token":"an-intruder-token-0123"}'),
              attempt(
                "own",
                "PUT",
                `${local.SHELL_SERVER_URL}/v1/workspaces/mine`,
                forged,
                '{"token":"an-intruder-token-0123"}',
              ),
              attempt("health", "GET", `${local.SHELL_SERVER_URL}/healthz`),
              errorMessages,
            ],
          },
          output_mapping: { "output.errors": "$.errors" },
        },
      },
    });
    expect(intruder.status).toBe("completed");
    const errors = intruder.output.errors as string[];
    expect(errors).toHaveLength(6);
    for (const [i, ref] of ["read", "forged_read", "forged_exec", "takeover", "own", "health"].entries()) {
      expect(errors[i]).toMatch(new RegExp(`^${ref} http\\.status .* answered 401$`));
    }
    expect(JSON.stringify(intruder)).not.toContain("the victim secret");
    expect(JSON.stringify(await journal(intruder.run_id))).not.toContain("the victim secret");

    // The victim's workspace is as it left it: nothing was written or run there.
    const finished = await victim.finish();
    expect(finished.status).toBe("completed");
    expect(finished.output.after).toBe("secret.txt\nthe victim secret\n");
  });

  it("lets a run with its own container reach only that container", async ({ expect }) => {
    const victim = await startVictim();
    const container = `${victim.runId}/dev_env`;
    // A task of another run whose payload names the victim's container (as a forged payload would).
    const result = await readAs(`intruder-${crypto.randomUUID()}`, container, "cat secret.txt; touch pwned");
    expect(result).toMatchObject({ success: false, error: { code: "container.not_owner" } });
    expect(JSON.stringify(result)).not.toContain("the victim secret");
    const finished = await victim.finish();
    expect(finished.output.after).toBe("secret.txt\nthe victim secret\n");
  });
});

describe("the shell action", () => {
  it("refuses a value that would run as code in arithmetic before the command runs (shell.unsafe_value)", async ({
    expect,
  }) => {
    const finished = await run(
      containerWorkflow(uniqueId("arith"), {
        main: {
          steps: [
            shell("count", "echo $(( {{n}} + 1 ))", {}, { on_failure: "continue", output_mapping: {} }),
            shell("safe", "echo {{n}}", {}, { output_mapping: { "output.echoed": "$.stdout" } }),
            shell("ls", "ls -A", {}, { output_mapping: { "output.files": "$.stdout" } }),
            errorCodes,
          ],
        },
      }),
      { n: "a[$(touch PWNED)]" },
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.output.main).toEqual({ codes: ["shell.unsafe_value"], echoed: "a[$(touch PWNED)]\n", files: "" });
  });

  it("passes a value containing shell syntax to the command as data", async ({ expect }) => {
    const id = uniqueId("inject");
    const value = "x; rm -rf / ; touch pwned1 $(touch pwned2) `touch pwned3` ' \" \\ && touch pwned4";
    const finished = await run(
      containerWorkflow(id, {
        main: {
          steps: [
            shell(
              "plain",
              "printf '%s|' {{name}} \"{{name}}\" '{{name}}'",
              {},
              { output_mapping: { "output.printed": "$.stdout" } },
            ),
            shell("ls", "ls -A", {}, { output_mapping: { "output.files": "$.stdout" } }),
          ],
        },
      }),
      { name: value },
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    expect(finished.output.main.printed).toBe(`${value}|${value}|${value}|`);
    expect(finished.output.main.files).toBe("");
    // The step record keeps the template, not the values, with the exit code and output sizes.
    const completed = (await journal(finished.run_id)).find((entry) => entry.kind === "task.completed");
    expect(callOf(completed)).toMatchObject({
      command_template: "printf '%s|' {{name}} \"{{name}}\" '{{name}}'",
      exit_code: 0,
      stdout_bytes: new TextEncoder().encode(`${value}|`.repeat(3)).length,
      stderr_bytes: 0,
    });
    expect(JSON.stringify(stepsOf(completed))).not.toContain("pwned");
  });

  it("kills a command past its timeout and fails the step with shell.timeout", async ({ expect }) => {
    const id = uniqueId("timeout");
    const started = Date.now();
    const finished = await run(
      containerWorkflow(id, { main: { steps: [shell("slow", "sleep 30 & sleep 30", { timeout_ms: 500 })] } }),
    );
    expect(finished.status).toBe("failed");
    expect(finished.error).toMatchObject({ code: "shell.timeout", node: "main" });
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("fails a non-zero exit with shell.exit_nonzero and the end of stderr, unless the step allows it", async ({
    expect,
  }) => {
    const failing = await run(
      containerWorkflow(uniqueId("exit"), {
        main: { steps: [shell("fail", "echo starting; echo 'boom: it broke' >&2; exit 4")] },
      }),
    );
    expect(failing.status).toBe("failed");
    expect(failing.error.code).toBe("shell.exit_nonzero");
    expect(failing.error.message).toContain("exited with 4");
    expect(failing.error.message).toContain("boom: it broke");

    const allowed = await run(
      containerWorkflow(uniqueId("exit"), {
        main: {
          steps: [
            shell("a", "exit 4", { allow_nonzero_exit: true }, { output_mapping: { "output.a": "$.exit_code" } }),
            shell("b", "exit 1", { ok_exit_codes: [0, 1] }, { output_mapping: { "output.b": "$" } }),
          ],
        },
      }),
    );
    expect(allowed.error ?? null).toBeNull();
    expect(allowed.status).toBe("completed");
    expect(allowed.output.main.a).toBe(4);
    expect(allowed.output.main.b).toMatchObject({
      exit_code: 1,
      stdout: "",
      stderr: "",
      truncated: false,
      timed_out: false,
    });
  });

  it("renders the working directory and environment, and reports truncated output", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("env"), {
        main: {
          steps: [
            shell("mk", "mkdir -p sub/{{dir}}"),
            shell(
              "where",
              "pwd | sed 's|.*/||'; echo \"$GREETING\"",
              { working_dir: "sub/{{dir}}", env: { GREETING: "hi {{dir}}" } },
              { output_mapping: { "output.where": "$.stdout" } },
            ),
            shell(
              "big",
              "head -c 100000 /dev/zero | tr '\\0' x",
              { max_output_bytes: 1000 },
              { output_mapping: { "output.big": "$" } },
            ),
          ],
        },
      }),
      { dir: "d1" },
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    expect(finished.output.main.where).toBe("d1\nhi d1\n");
    expect(finished.output.main.big).toMatchObject({ truncated: true, stdout_bytes: 100_000 });
    expect(finished.output.main.big.stdout.length).toBeLessThan(1_100);
  });

  it("fails a step whose node binds no container with container.not_bound", async ({ expect }) => {
    const id = uniqueId("unbound");
    const finished = await run({ id, nodes: { main: { task: { steps: [shell("x", "true")] } } } });
    expect(finished.status).toBe("failed");
    expect(finished.error.code).toBe("container.not_bound");
  });
});

describe("the standard library tools", () => {
  it("fails closed when the tool is not on the run's allowlist", async ({ expect }) => {
    const workflow = containerWorkflow(uniqueId("closed"), {
      main: { steps: [tool("read", "read_file", { path: "x" })] },
    });
    const finished = await run({ ...workflow, tools: ["tool:write_file"] });
    expect(finished.status).toBe("failed");
    expect(finished.error.code).toBe("tool.not_allowed");
    const none = await run({
      ...containerWorkflow(uniqueId("closed"), { main: { steps: [tool("read", "read_file", { path: "x" })] } }),
      tools: undefined,
    });
    expect(none.error.code).toBe("tool.not_allowed");
  });

  it("rejects an unknown tool and a bad shell template when the definition is registered", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      actions: [
        { id: uniqueId("t"), kind: "tool", implementation: { tool: "format_disk" } },
        { id: uniqueId("s"), kind: "shell", implementation: { command_template: "true", working_dir: "{{#if}}" } },
      ],
    });
    expect(response.status).toBe(400);
    const details = response.json.error.details.map((detail: { path: string; code: string }) => [
      detail.path,
      detail.code,
    ]);
    expect(details).toEqual([
      ["actions.0.implementation.tool", "definition.unknown_tool"],
      ["actions.1.implementation.working_dir", "definition.invalid_template"],
    ]);
  });

  it("validates a tool's input against its schema", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("invalid"), {
        main: { steps: [tool("commit", "git_commit", { message: "", surprise: true })] },
      }),
    );
    expect(finished.status).toBe("failed");
    expect(finished.error.code).toBe("tool.invalid_input");
  });

  it("reads, lists and deletes files, and refuses a path outside the workspace", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("files"), {
        main: {
          steps: [
            tool("w1", "write_file", { path: "a/one.txt", content: "1" }),
            tool("w2", "write_file", { path: "a/two.bin", content: "AAEC", encoding: "base64" }),
            tool(
              "list",
              "list_files",
              { recursive: true },
              { output_mapping: { "output.listed": "$.entries[*].path" } },
            ),
            tool(
              "read",
              "read_file",
              { path: "a/two.bin", encoding: "base64" },
              { output_mapping: { "output.read": "$.content" } },
            ),
            tool(
              "del",
              "delete_file",
              { path: "a", recursive: true },
              { output_mapping: { "output.deleted": "$.deleted" } },
            ),
            tool("after", "list_files", {}, { output_mapping: { "output.after": "$.entries" } }),
            tool("escape", "read_file", { path: "../../etc/passwd" }, { on_failure: "continue", output_mapping: {} }),
            errorCodes,
          ],
        },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    expect(finished.output.main).toEqual({
      listed: ["a", "a/one.txt", "a/two.bin"],
      read: "AAEC",
      deleted: true,
      after: [],
      codes: ["container.path_outside_workspace"],
    });
  });

  it("branches, merges and pushes with git, and reports status", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("git"), {
        main: {
          steps: [
            shell(
              "setup",
              "git init -q --bare remote.git && mkdir repo && cd repo && git init -q -b main . && git remote add origin ../remote.git",
            ),
            tool("w1", "write_file", { path: "repo/a.txt", content: "a\n" }),
            tool("c1", "git_commit", { repo: "repo", message: "first" }),
            shell("branch", "git checkout -q -b feature", { working_dir: "repo" }),
            tool("w2", "write_file", { path: "repo/b.txt", content: "b\n" }),
            tool(
              "c2",
              "git_commit",
              { repo: "repo", message: "second", author_name: "Grace", author_email: "grace@example.com" },
              { output_mapping: { "output.feature": "$.commit" } },
            ),
            shell("back", "git checkout -q main", { working_dir: "repo" }),
            tool("dirty", "write_file", { path: "repo/c.txt", content: "c\n" }),
            tool("status", "git_status", { repo: "repo" }, { output_mapping: { "output.status": "$" } }),
            tool("clean", "delete_file", { path: "repo/c.txt" }),
            tool(
              "merge",
              "git_merge",
              { repo: "repo", branch: "feature" },
              { output_mapping: { "output.merge": "$" } },
            ),
            tool("push", "git_push", { repo: "repo" }, { output_mapping: { "output.push": "$" } }),
            shell(
              "remote",
              "git --git-dir=remote.git log --format='%an %s' main",
              {},
              { output_mapping: { "output.remote": "$.stdout" } },
            ),
            tool(
              "nothing",
              "git_commit",
              { repo: "repo", message: "empty" },
              { on_failure: "continue", output_mapping: {} },
            ),
            errorCodes,
          ],
          output_mapping: { "output.result": "$" },
        },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    const result = finished.output.result;
    expect(result.status).toEqual({
      branch: "main",
      upstream: null,
      ahead: 0,
      behind: 0,
      clean: false,
      files: [{ path: "c.txt", index: "?", worktree: "?" }],
    });
    expect(result.merge).toEqual({ merged: true, commit: result.feature, fast_forward: true, conflicts: [] });
    expect(result.push).toMatchObject({ remote: "origin", branch: "main" });
    expect(result.remote).toBe("Grace second\nTrellis first\n");
    expect(result.codes).toEqual(["git.nothing_to_commit"]);
  });

  it("reports a merge conflict and aborts the merge", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("conflict"), {
        main: {
          steps: [
            shell(
              "setup",
              "git init -q -b main . && echo base > f.txt && git add f.txt && git -c user.name=t -c user.email=t@t commit -qm base && git checkout -qb other && echo theirs > f.txt && git -c user.name=t -c user.email=t@t commit -qam theirs && git checkout -q main && echo ours > f.txt && git -c user.name=t -c user.email=t@t commit -qam ours",
            ),
            tool("merge", "git_merge", { branch: "other" }, { output_mapping: { "output.merge": "$" } }),
            tool("status", "git_status", {}, { output_mapping: { "output.clean": "$.clean" } }),
          ],
        },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    expect(finished.output.main.merge).toMatchObject({ merged: false, conflicts: ["f.txt"], fast_forward: false });
    expect(finished.output.main.clean).toBe(true);
  });

  it("finds the project's test, lint and build commands, and installs packages", async ({ expect }) => {
    const pkg = {
      name: "app",
      version: "1.0.0",
      scripts: { test: "echo detected-test", lint: "echo detected-lint && exit 2", build: "echo detected-build" },
    };
    const finished = await run(
      containerWorkflow(uniqueId("project"), {
        main: {
          steps: [
            tool("pkg", "write_file", { path: "package.json", content: JSON.stringify(pkg) }),
            // npm stays offline: the tests send traffic to 127.0.0.1 only.
            tool("npmrc", "write_file", {
              path: ".npmrc",
              content: "offline=true\naudit=false\nfund=false\nupdate-notifier=false\n",
            }),
            tool("local", "write_file", {
              path: "vendor/localpkg/package.json",
              content: '{"name":"localpkg","version":"1.0.0"}',
            }),
            tool("test", "run_tests", {}, { output_mapping: { "output.test": "$" } }),
            tool("lint", "run_lint", {}, { output_mapping: { "output.lint": "$" } }),
            tool(
              "build",
              "run_build",
              { args: ["extra arg; not a command"] },
              { output_mapping: { "output.build": "$.stdout" } },
            ),
            tool(
              "install",
              "install_packages",
              { packages: ["./vendor/localpkg"] },
              { output_mapping: { "output.install": "$" } },
            ),
            tool("check", "read_file", { path: "package.json" }, { output_mapping: { "output.pkg": "$.content" } }),
          ],
        },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    const out = finished.output.main;
    expect(out.test).toMatchObject({ passed: true, command: "npm test --", exit_code: 0 });
    expect(out.test.stdout).toContain("detected-test");
    expect(out.lint).toMatchObject({ passed: false, command: "npm run lint --", exit_code: 2 });
    expect(out.build).toContain("detected-build extra arg; not a command");
    expect(out.install).toMatchObject({ manager: "npm", packages: ["./vendor/localpkg"], exit_code: 0 });
    expect(JSON.parse(out.pkg).dependencies).toEqual({ localpkg: "file:vendor/localpkg" });
  });

  it("says when no project command can be found", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("none"), {
        main: { steps: [tool("test", "run_tests", {}, { output_mapping: { "output.test": "$" } })] },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.status).toBe("completed");
    expect(finished.output.main.test).toMatchObject({ passed: false, exit_code: 127, command: "(none found)" });
    expect(finished.output.main.test.stderr).toContain("no test command found");
  });

  it("refuses a package name that looks like an option", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("opt"), {
        main: { steps: [tool("i", "install_packages", { packages: ["--registry=http://evil"] })] },
      }),
    );
    expect(finished.error.code).toBe("tool.invalid_input");
  });

  it("stores a workspace file as an artifact, and says when an artifact is missing", async ({ expect }) => {
    const finished = await run(
      containerWorkflow(uniqueId("artifact"), {
        main: {
          steps: [
            shell("make", "printf '\\001\\002\\003' > blob.bin"),
            tool(
              "store",
              "write_artifact",
              { name: "blob.bin", path: "blob.bin", content_type: "application/x-test" },
              { output_mapping: { "output.stored": "$.size" } },
            ),
            tool(
              "read",
              "read_artifact",
              { name: "blob.bin", encoding: "base64" },
              { output_mapping: { "output.read": "$.content" } },
            ),
            tool("empty", "write_artifact", { name: "empty.txt", content: "" }),
            tool(
              "readEmpty",
              "read_artifact",
              { name: "empty.txt" },
              { output_mapping: { "output.empty": "$.content" } },
            ),
            tool("missing", "read_artifact", { name: "nope.txt" }, { on_failure: "continue", output_mapping: {} }),
            errorCodes,
          ],
        },
      }),
    );
    expect(finished.error ?? null).toBeNull();
    expect(finished.output.main).toEqual({ stored: 3, read: "AQID", empty: "", codes: ["tool.artifact_not_found"] });
    const artifact = await (env.ARTIFACTS as R2Bucket).head(`runs/${finished.run_id}/artifacts/blob.bin`);
    expect(artifact?.size).toBe(3);
    expect(artifact?.httpMetadata?.contentType).toBe("application/x-test");
  });
});

describe("artifacts belong to their run and its family", () => {
  const ARTIFACT_TOOLS = ["tool:write_artifact", "tool:read_artifact", "tool:list_artifacts"];
  const artifactStep = (ref: string, name: string, input: Record<string, unknown>) => ({
    ref,
    action: { id: `t/${ref}`, version: 0, kind: "tool", implementation: { tool: name } },
    input_mapping: input,
    on_failure: "continue",
    output_mapping: { [`output.${ref}`]: "$" },
  });
  const codesStep = {
    ref: "codes",
    action: {
      id: "t/codes",
      version: 0,
      kind: "context",
      implementation: {
        updates: [{ path: "codes", expr: "has(input.errors) ? input.errors.map(e, e.step + ' ' + e.error.code) : []" }],
      },
    },
    input_mapping: { errors: { path: "$.state._errors", default: [] } },
    output_mapping: { "output.codes": "$.codes" },
  };

  /** One task of run `runId` (a child of `parent` when given), as the coordinator would send it. */
  async function task(runId: string, parent: string | undefined, steps: unknown[]): Promise<Record<string, any>> {
    const result = (await runOne({
      token_id: crypto.randomUUID(),
      workflow_run_id: runId,
      workflow_id: "wf",
      workflow_version: 0,
      ...(parent === undefined ? {} : { parent_run_id: parent }),
      node_id: "n",
      item_index: null,
      iteration: 1,
      task_id: "t",
      task_version: 0,
      task: { id: "t", version: 0, steps: [...steps, codesStep] },
      input: {},
      resources: {},
      timeout_ms: 10_000,
      retry_attempt: 0,
      tools: ARTIFACT_TOOLS,
    })) as { success: boolean; output: Record<string, any>; error?: unknown };
    if (!result.success) {
      throw new Error(JSON.stringify(result.error));
    }
    return result.output;
  }

  const read = (ref: string, runId: string, name: string) =>
    artifactStep(ref, "read_artifact", { run_id: runId, name });
  const list = (ref: string, runId: string) => artifactStep(ref, "list_artifacts", { run_id: runId });

  it("lets a run read its parent's artifacts and its children's, and no other run's", async ({ expect }) => {
    const parent = `run-${crypto.randomUUID()}`;
    const child = `run-${crypto.randomUUID()}`;
    const sibling = `run-${crypto.randomUUID()}`;
    const grandchild = `run-${crypto.randomUUID()}`;
    const stranger = `run-${crypto.randomUUID()}`;
    await task(parent, undefined, [
      artifactStep("w", "write_artifact", { name: "plan.txt", content: "the parent's plan" }),
    ]);
    const written = await task(child, parent, [
      artifactStep("w", "write_artifact", { name: "result.txt", content: "the child's result" }),
      read("up", parent, "plan.txt"),
      list("upList", parent),
    ]);
    expect(written.up).toMatchObject({ run_id: parent, content: "the parent's plan" });
    expect(written.upList.artifacts.map((a: { name: string }) => a.name)).toEqual(["plan.txt"]);
    expect(await (env.ARTIFACTS as R2Bucket).head(`runs/${child}/artifacts/result.txt`)).toMatchObject({
      customMetadata: { run_id: child, parent_run_id: parent },
    });

    const fromParent = await task(parent, undefined, [read("down", child, "result.txt"), list("downList", child)]);
    expect(fromParent.down).toMatchObject({ run_id: child, content: "the child's result" });
    expect(fromParent.downList.artifacts.map((a: { name: string }) => a.name)).toEqual(["result.txt"]);

    // Not family: a stranger, a sibling (reading the child), a grandchild (reading the grandparent).
    for (const [runId, runParent, target, name] of [
      [stranger, undefined, parent, "plan.txt"],
      [stranger, undefined, child, "result.txt"],
      [sibling, parent, child, "result.txt"],
      [grandchild, child, parent, "plan.txt"],
    ] as const) {
      const refused = await task(runId, runParent, [read("r", target, name), list("l", target)]);
      expect(refused.codes, `${runId} reading ${target}`).toEqual(["r tool.artifact_not_found"]);
      expect(refused.l).toEqual({ artifacts: [], truncated: false });
      expect(JSON.stringify(refused)).not.toMatch(/the parent's plan|the child's result/);
    }
  });

  it("answers the same for another run's missing artifact as for one it may not read", async ({ expect }) => {
    const owner = `run-${crypto.randomUUID()}`;
    const stranger = `run-${crypto.randomUUID()}`;
    await task(owner, undefined, [artifactStep("w", "write_artifact", { name: "exists.txt", content: "x" })]);
    const answers = await task(stranger, undefined, [read("a", owner, "exists.txt"), read("b", owner, "missing.txt")]);
    expect(answers.codes).toEqual(["a tool.artifact_not_found", "b tool.artifact_not_found"]);
  });
});

describe("handing a container to a sub-workflow", () => {
  it("lets a child run work in its parent's container when a workflow node binds it, and leaves the container to the parent", async ({
    expect,
  }) => {
    const child = uniqueId("kid");
    await registerWorkflow({
      id: child,
      tools: ALL_TOOLS,
      resources: { workspace: { type: "container" } },
      nodes: {
        read: {
          task: {
            steps: [
              tool("read", "read_file", { path: "note.txt" }, { output_mapping: { "output.note": "$.content" } }),
            ],
          },
          resource_bindings: { container: "workspace" },
          output_mapping: { "output.note": "$.note" },
        },
      },
    });
    const parent = containerWorkflow(uniqueId("handing"), {
      write: { steps: [tool("write", "write_file", { path: "note.txt", content: "from the parent" })] },
      again: {
        depends_on: ["kid"],
        steps: [tool("read", "read_file", { path: "note.txt" }, { output_mapping: { "output.note": "$.content" } })],
        output_mapping: { "output.after": "$.note" },
      },
    });
    const nodes = {
      ...parent.nodes,
      kid: {
        workflow: child,
        depends_on: ["write"],
        resource_bindings: { workspace: "dev_env" },
        output_mapping: { "output.from_child": "$.note" },
      },
    };
    const result = await run({ ...parent, nodes });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.output.from_child).toBe("from the parent");
    // The child ended before `again` ran: it did not release the container it was handed.
    expect(result.output.after).toBe("from the parent");
  });
});
