import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import {
  Sandbox,
  SandboxCore,
  SHELL_SERVER_PORT,
  type OwnerRecord,
  type ShellTransport,
} from "../../containers/index.ts";

const EXEC_RESULT = {
  exit_code: 0,
  signal: null,
  timed_out: false,
  stdout: "ok\n",
  stderr: "",
  stdout_bytes: 3,
  stderr_bytes: 0,
  truncated: false,
  duration_ms: 1,
};

/** A fake container: records what reaches it and answers as the shell server would (cloudflare/containers' makeMockCtx style). */
function makeFakeTransport(answer: { status: number; json: unknown } = { status: 200, json: EXEC_RESULT }) {
  const requests: { method: string; path: string; body: unknown }[] = [];
  const shutdowns: string[] = [];
  const transport: ShellTransport = {
    async request(method, path, body) {
      requests.push({ method, path, body });
      return answer;
    },
    async shutdown(workspace) {
      shutdowns.push(workspace);
    },
  };
  return { transport, requests, shutdowns };
}

function makeCore(options: { name?: string; answer?: { status: number; json: unknown } } = {}) {
  let record: OwnerRecord | undefined;
  const fake = makeFakeTransport(options.answer);
  const core = new SandboxCore({
    store: { get: () => record, put: (next) => (record = next) },
    transport: () => fake.transport,
    name: options.name,
    now: () => new Date("2026-01-01T00:00:00Z"),
  });
  return { core, fake, owner: () => record };
}

const exec = (container: string, runId: string, extra: Record<string, unknown> = {}) => ({
  container,
  run_id: runId,
  command: "echo ok",
  ...extra,
});

describe("Sandbox ownership (against a fake container)", () => {
  it("records the first run that uses the container as its owner", async ({ expect }) => {
    const { core, fake, owner } = makeCore();
    const reply = await core.call("exec", exec("run-a/dev", "run-a"));
    expect(reply).toEqual({ ok: true, value: EXEC_RESULT });
    expect(owner()).toEqual({ run_id: "run-a", container: "run-a/dev", claimed_at: "2026-01-01T00:00:00.000Z" });
    expect(fake.requests).toEqual([
      { method: "POST", path: "/v1/workspaces/run-a%2Fdev/exec", body: { command: "echo ok" } },
    ]);
  });

  it("refuses a command from any other run with container.not_owner, without reaching the container", async ({
    expect,
  }) => {
    const { core, fake } = makeCore();
    await core.call("exec", exec("run-a/dev", "run-a"));
    const reply = await core.call("exec", exec("run-a/dev", "run-b"));
    expect(reply).toEqual({
      ok: false,
      error: {
        code: "container.not_owner",
        message: expect.stringContaining("belongs to run run-a"),
        retryable: false,
      },
    });
    expect(fake.requests).toHaveLength(1);
    const caller = { container: "run-a/dev", run_id: "run-b" };
    const refusals = await Promise.all([
      core.call("readFile", { ...caller, path: "x" }),
      core.call("writeFile", { ...caller, path: "x", content: "" }),
      core.call("listFiles", caller),
      core.call("deleteFile", { ...caller, path: "x" }),
    ]);
    expect(refusals.map((refused) => (refused.ok ? "ok" : refused.error.code))).toEqual(
      Array(4).fill("container.not_owner"),
    );
    expect(fake.requests).toHaveLength(1);
  });

  it("admits a sub-workflow's run that its parent handed the container to", async ({ expect }) => {
    const { core, fake } = makeCore();
    await core.call("exec", exec("parent/dev", "parent"));
    const reply = await core.call("exec", exec("parent/dev", "child", { owner: "parent" }));
    expect(reply.ok).toBe(true);
    expect(fake.requests).toHaveLength(2);
    const forged = await core.call("exec", exec("parent/dev", "child", { owner: "someone-else" }));
    expect(forged.ok ? "ok" : forged.error.code).toBe("container.not_owner");
  });

  it("refuses a request that names another container than this one", async ({ expect }) => {
    const named = makeCore({ name: "run-a/dev" });
    const wrong = await named.core.call("exec", exec("run-b/dev", "run-b"));
    expect(wrong.ok ? "ok" : wrong.error.code).toBe("container.wrong_container");
    expect(named.fake.requests).toHaveLength(0);
    const unnamed = makeCore();
    await unnamed.core.call("exec", exec("run-a/dev", "run-a"));
    const other = await unnamed.core.call("exec", exec("run-b/dev", "run-a"));
    expect(other.ok ? "ok" : other.error.code).toBe("container.wrong_container");
  });

  it("stops the container on release and keeps the owner, so only that run may use it again", async ({ expect }) => {
    const { core, fake, owner } = makeCore();
    expect(await core.release()).toEqual({ released: false });
    await core.call("exec", exec("run-a/dev", "run-a"));
    expect(await core.release()).toEqual({ released: true });
    expect(fake.shutdowns).toEqual(["run-a/dev"]);
    expect(owner()).toMatchObject({ run_id: "run-a", released_at: "2026-01-01T00:00:00.000Z" });
    const other = await core.call("exec", exec("run-a/dev", "run-b"));
    expect(other.ok ? "ok" : other.error.code).toBe("container.not_owner");
    expect((await core.call("exec", exec("run-a/dev", "run-a"))).ok).toBe(true);
    expect(owner()?.released_at).toBeUndefined();
  });

  it("rejects a malformed request as container.invalid_request", async ({ expect }) => {
    const { core, fake } = makeCore();
    const reply = await core.call("exec", { container: "c", run_id: "r", command: "x", argv: ["y"] });
    expect(reply.ok ? "ok" : reply.error.code).toBe("container.invalid_request");
    expect(fake.requests).toHaveLength(0);
  });

  it.for([
    [{ status: 400, json: { error: { code: "no_such_file", message: "gone" } } }, "container.no_such_file", false],
    [
      { status: 400, json: { error: { code: "path_outside_workspace", message: "no" } } },
      "container.path_outside_workspace",
      false,
    ],
    [{ status: 401, json: { error: { code: "unauthorized", message: "no" } } }, "container.unauthorized", false],
    [{ status: 429, json: { error: { code: "busy", message: "busy" } } }, "container.unavailable", true],
    [{ status: 503, json: "down" }, "container.unavailable", true],
    [{ status: 200, json: { unexpected: true } }, "container.bad_answer", true],
  ] as const)("maps a shell server answer %j to an error code", async ([answer, code, retryable], { expect }) => {
    const { core } = makeCore({ answer });
    const reply = await core.call("readFile", { container: "c/d", run_id: "c", path: "x" });
    expect(reply).toEqual({ ok: false, error: { code, message: expect.any(String), retryable } });
  });

  it("reports a container that cannot be reached as retryable", async ({ expect }) => {
    const core = new SandboxCore({
      store: { get: () => undefined, put: () => {} },
      transport: () => ({
        request: async () => {
          throw new Error("connection refused");
        },
        shutdown: async () => {},
      }),
      name: undefined,
      now: () => new Date(),
    });
    const reply = await core.call("exec", exec("c/d", "c"));
    expect(reply).toEqual({
      ok: false,
      error: { code: "container.unavailable", message: expect.stringContaining("connection refused"), retryable: true },
    });
  });
});

describe("the Sandbox Durable Object in local mode", () => {
  const sandbox = (name: string) =>
    (env.SANDBOX as SandboxNamespace).get((env.SANDBOX as SandboxNamespace).idFromName(name));

  it("runs a command in its own workspace on the local shell server", async ({ expect }) => {
    const name = `run-${crypto.randomUUID()}/dev`;
    const stub = sandbox(name);
    const runId = name.split("/")[0];
    expect(await stub.exec({ container: name, run_id: runId, command: "echo hi > f.txt && cat f.txt" })).toMatchObject({
      ok: true,
      value: { exit_code: 0, stdout: "hi\n" },
    });
    expect(await stub.listFiles({ container: name, run_id: runId })).toEqual({
      ok: true,
      value: { entries: [{ path: "f.txt", type: "file", size: 3 }], truncated: false },
    });
  });

  it("knows its own name, so a stub cannot reach another container's workspace", async ({ expect }) => {
    const name = `run-${crypto.randomUUID()}/dev`;
    const reply = (await sandbox(name).exec({
      container: "someone-else/dev",
      run_id: "someone-else",
      command: "true",
    })) as { ok: boolean; error?: { code: string } };
    expect(reply.error?.code).toBe("container.wrong_container");
  });

  it("holds its own credential for its workspace: the shell server's token and another container's credential open nothing", async ({
    expect,
  }) => {
    const local = env as unknown as { SHELL_SERVER_URL: string; SHELL_SERVER_TOKEN: string };
    const victim = `run-${crypto.randomUUID()}/dev`;
    const other = `run-${crypto.randomUUID()}/dev`;
    await sandbox(victim).writeFile({
      container: victim,
      run_id: victim.split("/")[0],
      path: "secret.txt",
      content: "the victim's",
    });
    await sandbox(other).exec({ container: other, run_id: other.split("/")[0], command: "true" });
    const namespace = env.SANDBOX as unknown as DurableObjectNamespace<Sandbox>;
    const tokenOf = (name: string) =>
      runInDurableObject(namespace.get(namespace.idFromName(name)), (_instance, state) =>
        state.storage.kv.get<string>("sandbox:workspace-token"),
      );
    const victimToken = await tokenOf(victim);
    const otherToken = await tokenOf(other);
    expect(victimToken).toMatch(/^[0-9a-f]{48}$/);
    expect(otherToken).not.toBe(victimToken);
    expect(victimToken).not.toBe(local.SHELL_SERVER_TOKEN);

    const read = (token: string | undefined) =>
      fetch(`${local.SHELL_SERVER_URL}/v1/workspaces/${encodeURIComponent(victim)}/files/read`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
        body: JSON.stringify({ path: "secret.txt" }),
      }).then(async (response) => ({ status: response.status, text: await response.text() }));
    for (const token of [local.SHELL_SERVER_TOKEN, otherToken, undefined]) {
      const refused = await read(token);
      expect(refused.status).toBe(401);
      expect(refused.text).not.toContain("the victim's");
    }
    expect((await read(victimToken)).text).toContain("the victim's");
    // Registering the victim's workspace anew with the server token is refused too.
    const taken = await fetch(`${local.SHELL_SERVER_URL}/v1/workspaces/${encodeURIComponent(victim)}`, {
      method: "PUT",
      headers: { "content-type": "application/json", "authorization": `Bearer ${local.SHELL_SERVER_TOKEN}` },
      body: JSON.stringify({ token: "an-intruder-token-0123" }),
    });
    expect(taken.status).toBe(409);
    await taken.body?.cancel();
  });

  it("registers its workspace again when the shell server has forgotten it", async ({ expect }) => {
    const local = env as unknown as { SHELL_SERVER_URL: string };
    const name = `run-${crypto.randomUUID()}/dev`;
    const runId = name.split("/")[0];
    await sandbox(name).exec({ container: name, run_id: runId, command: "true" });
    const namespace = env.SANDBOX as unknown as DurableObjectNamespace<Sandbox>;
    const token = await runInDurableObject(namespace.get(namespace.idFromName(name)), (_instance, state) =>
      state.storage.kv.get<string>("sandbox:workspace-token"),
    );
    // As a shell server restarted on a fresh root would: the workspace and its registration are gone.
    const deleted = await fetch(`${local.SHELL_SERVER_URL}/v1/workspaces/${encodeURIComponent(name)}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${token}` },
    });
    expect(deleted.status).toBe(200);
    await deleted.body?.cancel();
    expect(await sandbox(name).exec({ container: name, run_id: runId, command: "echo back" })).toMatchObject({
      ok: true,
      value: { stdout: "back\n" },
    });
  });

  it("deletes the workspace on release and refuses other runs afterwards", async ({ expect }) => {
    const name = `run-${crypto.randomUUID()}/dev`;
    const runId = name.split("/")[0];
    const stub = sandbox(name);
    await stub.writeFile({ container: name, run_id: runId, path: "a.txt", content: "x" });
    expect(await stub.release()).toEqual({ released: true });
    expect(await stub.listFiles({ container: name, run_id: runId })).toEqual({
      ok: true,
      value: { entries: [], truncated: false },
    });
    const other = (await stub.exec({ container: name, run_id: "intruder", command: "true" })) as {
      ok: boolean;
      error?: { code: string };
    };
    expect(other.error?.code).toBe("container.not_owner");
  });
});

/**
 * What the container runtime gives a Durable Object as `ctx.container`, faked: starting it
 * records the options, and its port forwards to the local shell server as the container's own
 * shell server would answer: registering a workspace needs the token the Sandbox handed to the
 * container at start (swapped for the local server's token on the way), and workspace routes
 * pass through with the workspace token they carry.
 */
function makeFakeContainer() {
  const starts: { env?: Record<string, string> }[] = [];
  const seen: string[] = [];
  let running = false;
  const local = env as unknown as { SHELL_SERVER_URL: string; SHELL_SERVER_TOKEN: string };
  const container = {
    get running() {
      return running;
    },
    start(options: { env?: Record<string, string> }) {
      starts.push(options);
      running = true;
    },
    monitor: () => new Promise<void>(() => {}),
    destroy: async () => {
      running = false;
    },
    signal: () => {
      running = false;
    },
    getTcpPort: (port: number) => ({
      fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
        const request = new Request(input, init);
        const path = new URL(request.url).pathname;
        seen.push(`${port} ${request.method} ${path}`);
        if (!path.startsWith("/v1/")) {
          return new Response("ready"); // the library's readiness probes
        }
        const headers = new Headers(request.headers);
        if (request.method === "PUT") {
          const token = starts.at(-1)?.env?.SHELL_SERVER_TOKEN;
          if (token === undefined || request.headers.get("authorization") !== `Bearer ${token}`) {
            return Response.json({ error: { code: "unauthorized", message: "wrong token" } }, { status: 401 });
          }
          headers.set("authorization", `Bearer ${local.SHELL_SERVER_TOKEN}`);
        }
        return fetch(`${local.SHELL_SERVER_URL}${path}`, {
          method: request.method,
          headers,
          body: request.method === "DELETE" ? undefined : await request.text(),
        });
      },
    }),
    setInactivityTimeout: async () => {},
    interceptOutboundHttp: async () => {},
    interceptAllOutboundHttp: async () => {},
    interceptOutboundHttps: async () => {},
    inspect: async () => null,
  };
  return { container, starts, seen, isRunning: () => running };
}

describe("the Sandbox Durable Object with a container (fake ctx.container)", () => {
  it("starts the container with a fresh token, forwards over its port, and destroys it on release", async ({
    expect,
  }) => {
    const name = `run-${crypto.randomUUID()}/dev`;
    const runId = name.split("/")[0] ?? "";
    const namespace = env.SANDBOX as unknown as DurableObjectNamespace<Sandbox>;
    await runInDurableObject(namespace.get(namespace.idFromName(name)), async (_instance, state) => {
      const fake = makeFakeContainer();
      // The runtime's own state, with the fake container where the runtime would put its own.
      Object.defineProperty(state, "container", { value: fake.container, configurable: true });
      const sandbox = new Sandbox(state as DurableObjectState<{}>, { ...env, CONTAINER_MODE: undefined });
      const reply = await sandbox.exec({ container: name, run_id: runId, command: "echo from-the-container" });
      expect(reply).toMatchObject({ ok: true, value: { exit_code: 0, stdout: "from-the-container\n" } });
      expect(fake.starts).toHaveLength(1);
      expect(fake.starts[0]?.env?.SHELL_SERVER_TOKEN).toMatch(/^[0-9a-f]{48}$/);
      const workspace = `/v1/workspaces/${encodeURIComponent(name)}`;
      // The first exec finds the workspace unknown, registers it with the container's token, and runs.
      expect(fake.seen.filter((line) => line.includes("/v1/"))).toEqual([
        `${SHELL_SERVER_PORT} POST ${workspace}/exec`,
        `${SHELL_SERVER_PORT} PUT ${workspace}`,
        `${SHELL_SERVER_PORT} POST ${workspace}/exec`,
      ]);
      const refused = await sandbox.exec({ container: name, run_id: "another-run", command: "true" });
      expect(refused).toMatchObject({ ok: false, error: { code: "container.not_owner" } });
      expect(await sandbox.release()).toEqual({ released: true });
      expect(fake.isRunning()).toBe(false);
    });
  });
});

describe("latency of the Durable Object → shell server hop", () => {
  it("runs a trivial command through the Sandbox in well under a second (prints the measurement)", async ({
    expect,
  }) => {
    const name = `run-${crypto.randomUUID()}/dev`;
    const runId = name.split("/")[0];
    const stub = (env.SANDBOX as SandboxNamespace).get((env.SANDBOX as SandboxNamespace).idFromName(name));
    await stub.exec({ container: name, run_id: runId, command: "true" });
    const hop: number[] = [];
    const server: number[] = [];
    for (let i = 0; i < 20; i += 1) {
      const started = performance.now();
      const reply = (await stub.exec({ container: name, run_id: runId, command: "true" })) as {
        ok: true;
        value: { duration_ms: number };
      };
      hop.push(performance.now() - started);
      server.push(reply.value.duration_ms);
    }
    const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
    console.log(
      `sandbox hop: exec(true) n=20 p50=${p50(hop).toFixed(1)}ms max=${Math.max(...hop).toFixed(1)}ms server_exec_p50=${p50(server)}ms`,
    );
    expect(p50(hop)).toBeLessThan(1_000);
  });
});
