import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, it, vi } from "vitest";
import { createCapture, startShellServer } from "../../containers/shell-server/server.mjs";

type Server = Awaited<ReturnType<typeof startShellServer>>;
let server: Server;

beforeAll(async () => {
  server = await startShellServer({ port: 0 });
});
afterAll(async () => {
  await server.close();
});

async function call(
  path: string,
  body?: unknown,
  token: string | null = server.token,
  method = "POST",
): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) {
    headers.authorization = `Bearer ${token}`;
  }
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: await response.json() };
}

const workspaceUrl = (workspace: string) => `/v1/workspaces/${encodeURIComponent(workspace)}`;
const register = (workspace: string, token: string, serverToken: string | null = server.token) =>
  call(workspaceUrl(workspace), { token }, serverToken, "PUT");

/** Each workspace's own token, registered with the server token on first use (as the Sandbox does). */
const tokens = new Map<string, string>();
async function tokenOf(workspace: string): Promise<string> {
  let token = tokens.get(workspace);
  if (token === undefined) {
    token = `ws-${crypto.randomUUID()}`;
    const registered = await register(workspace, token);
    if (registered.status !== 200) {
      throw new Error(JSON.stringify(registered.json));
    }
    tokens.set(workspace, token);
  }
  return token;
}

const exec = async (workspace: string, body: Record<string, unknown>) =>
  call(`${workspaceUrl(workspace)}/exec`, body, await tokenOf(workspace));
const files = async (workspace: string, op: string, body: Record<string, unknown>) =>
  call(`${workspaceUrl(workspace)}/files/${op}`, body, await tokenOf(workspace));

/** Whether a process is gone (or a zombie waiting to be reaped, which runs nothing). */
function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

describe("shell server: authentication", () => {
  it("listens on 127.0.0.1", ({ expect }) => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("refuses a request without a token", async ({ expect }) => {
    const response = await call("/healthz", undefined, null, "GET");
    expect(response.status).toBe(401);
    expect(response.json.error.code).toBe("unauthorized");
  });

  it("refuses a request with a wrong token, also for commands", async ({ expect }) => {
    expect((await call("/healthz", undefined, "not-the-token-at-all", "GET")).status).toBe(401);
    const response = await call("/v1/workspaces/w/exec", { command: "touch pwned" }, `${await tokenOf("w")}x`);
    expect(response.status).toBe(401);
    expect(existsSync(join(server.workspacePath("w"), "pwned"))).toBe(false);
  });

  it("answers health with the right token", async ({ expect }) => {
    const response = await call("/healthz", undefined, server.token, "GET");
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ ok: true });
  });
});

describe("shell server: one credential per workspace", () => {
  it("refuses the server token on every workspace route, running and touching nothing", async ({ expect }) => {
    const ws = `run-${crypto.randomUUID()}/dev`;
    await files(ws, "write", { path: "secret.txt", content: "mine" });
    const routes: [string, string, unknown][] = [
      ["POST", "/exec", { command: "touch pwned" }],
      ["POST", "/files/read", { path: "secret.txt" }],
      ["POST", "/files/write", { path: "pwned", content: "x" }],
      ["POST", "/files/list", {}],
      ["POST", "/files/delete", { path: "secret.txt" }],
      ["DELETE", "", undefined],
    ];
    for (const [method, route, body] of routes) {
      const refused = await call(`${workspaceUrl(ws)}${route}`, body, server.token, method);
      expect(refused.status, `${method} ${route}`).toBe(401);
      expect(refused.json.error).toMatchObject({
        code: "unauthorized",
        message: expect.stringContaining("the server token does not open a workspace"),
      });
    }
    expect(existsSync(join(server.workspacePath(ws), "pwned"))).toBe(false);
    expect(readFileSync(join(server.workspacePath(ws), "secret.txt"), "utf8")).toBe("mine");
  });

  it("refuses another workspace's token, and no token at all", async ({ expect }) => {
    const victim = `run-${crypto.randomUUID()}/dev`;
    const intruder = `run-${crypto.randomUUID()}/dev`;
    await files(victim, "write", { path: "secret.txt", content: "mine" });
    const stolen = await tokenOf(intruder);
    const read = await call(`${workspaceUrl(victim)}/files/read`, { path: "secret.txt" }, stolen);
    expect(read.status).toBe(401);
    expect(read.json.error.code).toBe("unauthorized");
    expect(JSON.stringify(read.json)).not.toContain("mine");
    expect((await call(`${workspaceUrl(victim)}/exec`, { command: "touch pwned" }, stolen)).status).toBe(401);
    expect((await call(`${workspaceUrl(victim)}/exec`, { command: "touch pwned" }, null)).status).toBe(401);
    expect(existsSync(join(server.workspacePath(victim), "pwned"))).toBe(false);
  });

  it("registers a workspace only with the server token, once: the same token again is a no-op, another is refused", async ({
    expect,
  }) => {
    const ws = `run-${crypto.randomUUID()}/dev`;
    expect((await register(ws, "a-workspace-token-1", null)).status).toBe(401);
    expect((await register(ws, "a-workspace-token-1", "a-workspace-token-1")).status).toBe(401);
    expect(await register(ws, "a-workspace-token-1")).toEqual({
      status: 200,
      json: { registered: true, created: true },
    });
    expect(await register(ws, "a-workspace-token-1")).toEqual({
      status: 200,
      json: { registered: true, created: false },
    });
    const taken = await register(ws, "a-workspace-token-2");
    expect(taken.status).toBe(409);
    expect(taken.json.error.code).toBe("workspace_taken");
    expect((await register(ws, "short")).status).toBe(400);
    expect((await register(`run-${crypto.randomUUID()}/dev`, server.token)).status).toBe(400);
  });

  it("answers workspace_not_registered for a workspace nobody registered, and runs nothing", async ({ expect }) => {
    const ws = `run-${crypto.randomUUID()}/dev`;
    const response = await call(`${workspaceUrl(ws)}/exec`, { command: "touch pwned" }, "some-token-of-enough-length");
    expect(response.status).toBe(401);
    expect(response.json.error.code).toBe("workspace_not_registered");
    expect(existsSync(server.workspacePath(ws))).toBe(false);
  });

  it("starts a newly registered workspace empty, whatever was left in its directory", async ({ expect }) => {
    const ws = `run-${crypto.randomUUID()}/dev`;
    await writeFile(join(await ensureDir(server.workspacePath(ws)), "left-behind.txt"), "old");
    expect((await files(ws, "list", {})).json.entries).toEqual([]);
  });

  it("forgets a deleted workspace's registration, so its token opens nothing afterwards", async ({ expect }) => {
    const ws = `run-${crypto.randomUUID()}/dev`;
    const token = await tokenOf(ws);
    await files(ws, "write", { path: "a.txt", content: "x" });
    expect((await call(workspaceUrl(ws), undefined, token, "DELETE")).json).toEqual({ deleted: true });
    expect((await call(`${workspaceUrl(ws)}/files/list`, {}, token)).json.error.code).toBe("workspace_not_registered");
    expect((await register(ws, "a-new-owner-token-1")).json).toEqual({ registered: true, created: true });
    expect((await call(`${workspaceUrl(ws)}/files/list`, {}, "a-new-owner-token-1")).json.entries).toEqual([]);
  });

  it("keeps registrations across a restart on the same workspace root", async ({ expect }) => {
    const root = await mkdtemp(join(tmpdir(), "trellis-shell-restart-"));
    const serverToken = "the-server-token-for-restarts";
    const first = await startShellServer({ port: 0, token: serverToken, workspaceRoot: root });
    const at = (s: Server, path: string, body: unknown, token: string, method = "POST") =>
      fetch(`${s.url}${path}`, {
        method,
        headers: { "authorization": `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, json: await r.json() }));
    try {
      expect(
        (await at(first, workspaceUrl("run-a/dev"), { token: "token-of-run-a-xyz" }, serverToken, "PUT")).status,
      ).toBe(200);
      await at(
        first,
        `${workspaceUrl("run-a/dev")}/files/write`,
        { path: "kept.txt", content: "still here" },
        "token-of-run-a-xyz",
      );
    } finally {
      await first.close();
    }
    const second = await startShellServer({ port: 0, token: serverToken, workspaceRoot: root });
    try {
      expect(
        (await at(second, `${workspaceUrl("run-a/dev")}/files/read`, { path: "kept.txt" }, "token-of-run-a-xyz")).json
          .content,
      ).toBe("still here");
      expect(
        (await at(second, workspaceUrl("run-a/dev"), { token: "an-intruders-token" }, serverToken, "PUT")).status,
      ).toBe(409);
      expect(
        (await at(second, `${workspaceUrl("run-a/dev")}/files/read`, { path: "kept.txt" }, serverToken)).status,
      ).toBe(401);
      expect(readFileSync(join(root, ".registry", "run-a.2fdev"), "utf8")).not.toContain("token-of-run-a-xyz");
    } finally {
      await second.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("shell server: commands", () => {
  it("runs a command in the workspace with the given environment and reports its exit code", async ({ expect }) => {
    const response = await exec("run/a", {
      command: 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3',
      env: { GREETING: "hello" },
    });
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ exit_code: 3, timed_out: false, truncated: false, stderr: "oops\n" });
    expect(response.json.stdout).toBe(`hello from ${server.workspacePath("run/a")}\n`);
  });

  it("passes only a small environment, never the server's own", async ({ expect }) => {
    process.env.TRELLIS_SHELL_SERVER_TEST_SECRET = "leak";
    try {
      const response = await exec("env", { command: "env" });
      expect(response.json.stdout).not.toContain("TRELLIS_SHELL_SERVER_TEST_SECRET");
      expect(response.json.stdout).toContain("GIT_TERMINAL_PROMPT=0");
    } finally {
      delete process.env.TRELLIS_SHELL_SERVER_TEST_SECRET;
    }
  });

  it("runs argv without a shell, so shell syntax in an argument is data", async ({ expect }) => {
    const response = await exec("argv", { argv: ["printf", "%s", "$(touch pwned); rm -rf /"] });
    expect(response.json.stdout).toBe("$(touch pwned); rm -rf /");
    expect(existsSync(join(server.workspacePath("argv"), "pwned"))).toBe(false);
  });

  it("feeds stdin and honours a working directory inside the workspace", async ({ expect }) => {
    await exec("cwd", { command: "mkdir -p sub/dir" });
    const response = await exec("cwd", { command: "cat; pwd", cwd: "sub/dir", stdin: "input text\n" });
    expect(response.json.stdout).toBe(`input text\n${join(server.workspacePath("cwd"), "sub/dir")}\n`);
    const outside = await exec("cwd", { command: "pwd", cwd: "../.." });
    expect(outside.status).toBe(400);
    expect(outside.json.error.code).toBe("path_outside_workspace");
  });

  it("kills the whole process group on timeout, grandchildren included", async ({ expect }) => {
    const started = Date.now();
    const response = await exec("timeout", {
      command: "sh -c 'sleep 60 & echo $! > grandchild.pid; wait' & sleep 60",
      timeout_ms: 700,
    });
    expect(response.status).toBe(200);
    expect(response.json.timed_out).toBe(true);
    expect(response.json.exit_code).toBeNull();
    expect(response.json.signal).toBe("SIGKILL");
    expect(Date.now() - started).toBeLessThan(10_000);
    const pid = Number(readFileSync(join(server.workspacePath("timeout"), "grandchild.pid"), "utf8"));
    expect(pid).toBeGreaterThan(0);
    await vi.waitFor(() => expect(isGone(pid)).toBe(true), { timeout: 5_000 });
  });

  it("ends what a command left running in the background when it exits", async ({ expect }) => {
    const response = await exec("background", { command: "sleep 60 & echo $! > bg.pid; echo done" });
    expect(response.json).toMatchObject({ exit_code: 0, stdout: "done\n", timed_out: false });
    const pid = Number(readFileSync(join(server.workspacePath("background"), "bg.pid"), "utf8"));
    await vi.waitFor(() => expect(isGone(pid)).toBe(true), { timeout: 5_000 });
  });

  it("returns 50 MB of output truncated, and says so with the full byte count", async ({ expect }) => {
    const bytes = 50 * 1024 * 1024;
    const response = await exec("big", {
      command: `head -c ${bytes} /dev/zero | tr '\\0' a; echo tail-marker`,
      timeout_ms: 60_000,
    });
    expect(response.status).toBe(200);
    expect(response.json.exit_code).toBe(0);
    expect(response.json.truncated).toBe(true);
    expect(response.json.stdout_bytes).toBe(bytes + "tail-marker\n".length);
    expect(response.json.stdout.length).toBeLessThan(1024 * 1024 + 200);
    expect(response.json.stdout).toMatch(/^a+\n… \[\d+ bytes omitted\] …\na+tail-marker\n$/);
  });

  it("reports a command that cannot start", async ({ expect }) => {
    const response = await exec("missing", { argv: ["definitely-not-a-command-xyz"] });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("command_not_found");
  });

  it("rejects a malformed request without running anything", async ({ expect }) => {
    expect((await exec("bad", { command: "true", argv: ["true"] })).status).toBe(400);
    expect((await exec("bad", { command: "true", env: { "BAD NAME": "x" } })).status).toBe(400);
    expect((await exec("bad", { command: "true", timeout_ms: -1 })).status).toBe(400);
  });
});

describe("shell server: workspaces and files", () => {
  it("keeps workspaces separate", async ({ expect }) => {
    await exec("run-1/container", { command: "echo one > only-here.txt" });
    const other = await exec("run-2/container", { command: "ls; cat only-here.txt" });
    expect(other.json.stdout).toBe("");
    expect(other.json.exit_code).not.toBe(0);
    expect(server.workspacePath("run-1/container")).not.toBe(server.workspacePath("run-2/container"));
    const listed = await files("run-2/container", "list", {});
    expect(listed.json.entries).toEqual([]);
  });

  it("writes, reads, lists and deletes files", async ({ expect }) => {
    const ws = "files";
    expect((await files(ws, "write", { path: "src/a.txt", content: "héllo" })).json).toEqual({
      path: "src/a.txt",
      size: 6,
    });
    await files(ws, "write", { path: "src/a.txt", content: " world", append: true });
    await files(ws, "write", {
      path: "bin.dat",
      content: Buffer.from([0, 1, 2, 255]).toString("base64"),
      encoding: "base64",
    });
    expect((await files(ws, "read", { path: "src/a.txt" })).json).toMatchObject({
      content: "héllo world",
      size: 12,
      truncated: false,
    });
    expect((await files(ws, "read", { path: "bin.dat", encoding: "base64" })).json.content).toBe("AAEC/w==");
    expect((await files(ws, "read", { path: "src/a.txt", max_bytes: 3 })).json).toMatchObject({
      content: "hé",
      truncated: true,
    });
    const listed = await files(ws, "list", { recursive: true });
    expect(listed.json.entries).toEqual([
      { path: "bin.dat", type: "file", size: 4 },
      { path: "src", type: "dir", size: 0 },
      { path: "src/a.txt", type: "file", size: 12 },
    ]);
    expect((await files(ws, "delete", { path: "src" })).json.error.code).toBe("is_a_directory");
    expect((await files(ws, "delete", { path: "src", recursive: true })).json).toEqual({ path: "src", deleted: true });
    expect((await files(ws, "delete", { path: "src" })).json).toEqual({ path: "src", deleted: false });
    expect((await files(ws, "read", { path: "src/a.txt" })).json.error.code).toBe("no_such_file");
  });

  it("refuses paths that leave the workspace, through .. or a symbolic link", async ({ expect }) => {
    const ws = "escape";
    expect((await files(ws, "read", { path: "../../etc/passwd" })).json.error.code).toBe("path_outside_workspace");
    expect((await files(ws, "read", { path: "/etc/passwd" })).json.error.code).toBe("path_outside_workspace");
    const dir = server.workspacePath(ws);
    await mkdir(dir, { recursive: true });
    await symlink("/etc", join(dir, "link"));
    expect((await files(ws, "read", { path: "link/passwd" })).json.error.code).toBe("path_outside_workspace");
    expect((await files(ws, "write", { path: "link/x", content: "x" })).json.error.code).toBe("path_outside_workspace");
  });

  it("deletes a workspace, ending its running commands", async ({ expect }) => {
    const ws = "doomed";
    await files(ws, "write", { path: "f", content: "x" });
    const pending = exec(ws, { command: "sleep 30", timeout_ms: 30_000 });
    await vi.waitFor(async () =>
      expect((await call("/healthz", undefined, server.token, "GET")).json.running).toBeGreaterThan(0),
    );
    const deleted = await call(`/v1/workspaces/${ws}`, undefined, await tokenOf(ws), "DELETE");
    expect(deleted.json).toEqual({ deleted: true });
    const finished = await pending;
    expect(finished.json.signal).toBe("SIGKILL");
    expect(existsSync(server.workspacePath(ws))).toBe(false);
  });
});

describe("shell server: output capture", () => {
  it("keeps everything under the limit and the head and tail past it", ({ expect }) => {
    const small = createCapture(10);
    small.push(Buffer.from("0123"));
    small.push(Buffer.from("456789"));
    expect(small.result()).toEqual({ text: "0123456789", bytes: 10, truncated: false });
    const big = createCapture(6);
    for (const part of ["abc", "def", "ghi", "jkl"]) {
      big.push(Buffer.from(part));
    }
    expect(big.result()).toEqual({ text: "abc\n… [6 bytes omitted] …\njkl", bytes: 12, truncated: true });
  });
});

describe("shell server: standalone", () => {
  it("stops by itself when its standard input closes", async ({ expect }) => {
    const child = spawn(process.execPath, ["containers/shell-server/server.mjs", "--watch-stdin"], {
      env: { ...process.env, SHELL_SERVER_TOKEN: "a-token-of-sufficient-length" },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const line = await new Promise<string>((resolve) =>
      child.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString("utf8"))),
    );
    const { url } = JSON.parse(line) as { url: string };
    const health = await fetch(`${url}/healthz`, { headers: { authorization: "Bearer a-token-of-sufficient-length" } });
    expect(health.status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.stdin.end();
    expect(await exited).toBe(0);
  });
});

async function ensureDir(path: string): Promise<string> {
  await mkdir(path, { recursive: true });
  return path;
}
