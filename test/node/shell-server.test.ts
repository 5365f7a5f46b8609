import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, symlink, writeFile } from "node:fs/promises";
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

async function call(path: string, body?: unknown, token: string | null = server.token, method = "POST"): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) {
    headers.authorization = `Bearer ${token}`;
  }
  const response = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, json: await response.json() };
}

const exec = (workspace: string, body: Record<string, unknown>) => call(`/v1/workspaces/${encodeURIComponent(workspace)}/exec`, body);
const files = (workspace: string, op: string, body: Record<string, unknown>) => call(`/v1/workspaces/${encodeURIComponent(workspace)}/files/${op}`, body);

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
    const response = await call("/v1/workspaces/w/exec", { command: "touch pwned" }, `${server.token}x`);
    expect(response.status).toBe(401);
    expect(existsSync(join(server.workspacePath("w"), "pwned"))).toBe(false);
  });

  it("answers health with the right token", async ({ expect }) => {
    const response = await call("/healthz", undefined, server.token, "GET");
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ ok: true });
  });
});

describe("shell server: commands", () => {
  it("runs a command in the workspace with the given environment and reports its exit code", async ({ expect }) => {
    const response = await exec("run/a", { command: 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3', env: { GREETING: "hello" } });
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
    const response = await exec("big", { command: `head -c ${bytes} /dev/zero | tr '\\0' a; echo tail-marker`, timeout_ms: 60_000 });
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
    expect((await files(ws, "write", { path: "src/a.txt", content: "héllo" })).json).toEqual({ path: "src/a.txt", size: 6 });
    await files(ws, "write", { path: "src/a.txt", content: " world", append: true });
    await files(ws, "write", { path: "bin.dat", content: Buffer.from([0, 1, 2, 255]).toString("base64"), encoding: "base64" });
    expect((await files(ws, "read", { path: "src/a.txt" })).json).toMatchObject({ content: "héllo world", size: 12, truncated: false });
    expect((await files(ws, "read", { path: "bin.dat", encoding: "base64" })).json.content).toBe("AAEC/w==");
    expect((await files(ws, "read", { path: "src/a.txt", max_bytes: 3 })).json).toMatchObject({ content: "hé", truncated: true });
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
    await writeFile(join(await ensureDir(server.workspacePath(ws)), "f"), "x");
    const pending = exec(ws, { command: "sleep 30", timeout_ms: 30_000 });
    await vi.waitFor(async () => expect((await call("/healthz", undefined, server.token, "GET")).json.running).toBeGreaterThan(0));
    const deleted = await call(`/v1/workspaces/${ws}`, undefined, server.token, "DELETE");
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
    const line = await new Promise<string>((resolve) => child.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString("utf8"))));
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
