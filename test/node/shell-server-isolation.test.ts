/**
 * Workspaces of one shell server against each other's commands (local mode:
 * one server serves every run). As root, each workspace has its own uid and
 * the kernel keeps them apart; not as root, the server says it cannot, and
 * these tests assert exactly the weakness docs/containers.md documents. Every
 * test runs in both cases: none is skipped.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, it, vi } from "vitest";
import { encodeWorkspaceId, NO_ISOLATION_WARNING, startShellServer } from "../../containers/shell-server/server.mjs";
import { DEFAULT_UID_BASE } from "../../containers/shell-server/workspace-users.mjs";
import { copyShellServer } from "./shell-server-copy.ts";

type Server = Awaited<ReturnType<typeof startShellServer>>;
type Answer = { status: number; json: any };

const IS_ROOT = process.getuid?.() === 0;
const MODE = IS_ROOT ? "as root: a uid per workspace" : "not root: no isolation, as documented";

let server: Server;
beforeAll(async () => {
  server = await startShellServer({ port: 0 });
});
afterAll(async () => {
  await server.close();
});

function clientOf(s: Server) {
  const tokens = new Map<string, string>();
  const call = async (path: string, body: unknown, token: string, method = "POST"): Promise<Answer> => {
    const response = await fetch(`${s.url}${path}`, {
      method,
      headers: { "authorization": `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, json: await response.json() };
  };
  const url = (ws: string) => `/v1/workspaces/${encodeURIComponent(ws)}`;
  const tokenOf = async (ws: string, token = `ws-${crypto.randomUUID()}`): Promise<string> => {
    const known = tokens.get(ws);
    if (known !== undefined) {
      return known;
    }
    const registered = await call(url(ws), { token }, s.token, "PUT");
    if (registered.status !== 200) {
      throw new Error(JSON.stringify(registered.json));
    }
    tokens.set(ws, token);
    return token;
  };
  return {
    tokenOf,
    exec: async (ws: string, body: Record<string, unknown>) => call(`${url(ws)}/exec`, body, await tokenOf(ws)),
    files: async (ws: string, op: string, body: Record<string, unknown>) =>
      call(`${url(ws)}/files/${op}`, body, await tokenOf(ws)),
    remove: async (ws: string) => call(url(ws), undefined, await tokenOf(ws), "DELETE"),
    health: () => call("/healthz", undefined, s.token, "GET"),
  };
}

const client = () => clientOf(server);
const fresh = () => `run-${crypto.randomUUID()}/dev`;
/** The path from one workspace's directory to another's (they are siblings under the root). */
const sibling = (ws: string) => `../${encodeWorkspaceId(ws)}`;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * Runs the standalone server as `uid` (undefined: as this process) and returns its stderr and /healthz answer.
 * Another uid runs a copy that it may enter: the repository may sit where only its owner can.
 */
async function startStandalone(uid: number | undefined): Promise<{ stderr: string; health: any }> {
  const token = "a-token-of-sufficient-length";
  const copy = uid === undefined ? undefined : await copyShellServer(0o755);
  const [node, server] =
    copy === undefined ? [process.execPath, "containers/shell-server/server.mjs"] : [copy.node, copy.server];
  const child = spawn(node, [server, "--watch-stdin"], {
    cwd: copy?.folder,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SHELL_SERVER_TOKEN: token },
    stdio: ["pipe", "pipe", "pipe"],
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString("utf8")));
      child.once("exit", (code) => reject(new Error(`the server exited (${code}): ${stderr}`)));
    });
    const { url } = JSON.parse(line) as { url: string };
    const health = await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${token}` } })).json();
    return { stderr, health };
  } finally {
    child.stdin.end();
    await exited;
    await copy?.remove();
  }
}

describe(`shell server isolation (${MODE})`, () => {
  it("says how it keeps workspaces apart: a uid per workspace as root, none otherwise, with a warning on stderr", async ({
    expect,
  }) => {
    expect(server.isolation).toBe(IS_ROOT ? "uid" : "none");
    expect((await client().health()).json.isolation).toBe(server.isolation);
    // The fallback, for real, whoever runs the tests: an unprivileged server (as nobody when this is root) warns once.
    const unprivileged = await startStandalone(IS_ROOT ? 65_534 : undefined);
    expect(unprivileged.health.isolation).toBe("none");
    expect(unprivileged.stderr.split(NO_ISOLATION_WARNING).length - 1).toBe(1);
    expect(NO_ISOLATION_WARNING).toContain("NOT isolated");
    if (IS_ROOT) {
      const privileged = await startStandalone(undefined);
      expect(privileged.health.isolation).toBe("uid");
      expect(privileged.stderr).not.toContain("NOT isolated");
    }
  });

  it("gives every workspace its own uid and gid with no other groups and umask 077, recorded with its registration and kept across a restart", async ({
    expect,
  }) => {
    const root = await mkdtemp(join(tmpdir(), "trellis-isolation-restart-"));
    const first = await startShellServer({ port: 0, workspaceRoot: root, token: "the-server-token-for-restarts" });
    const a = fresh();
    const b = fresh();
    let before: string[];
    try {
      const c = clientOf(first);
      await c.tokenOf(a, "token-of-workspace-a-1234");
      const probe = "id -u; id -g; id -G; umask";
      before = (await c.exec(a, { command: probe })).json.stdout.split("\n");
      const other = (await c.exec(b, { command: probe })).json.stdout.split("\n");
      const [uid, gid, groups, umask] = before;
      if (IS_ROOT) {
        expect(Number(uid)).toBeGreaterThanOrEqual(DEFAULT_UID_BASE);
        expect(gid).toBe(uid);
        expect(groups).toBe(uid);
        expect(umask).toBe("0077");
        expect(other[0]).not.toBe(uid);
        expect(readFileSync(join(root, ".registry", encodeWorkspaceId(a)), "utf8")).toMatch(
          new RegExp(`^[0-9a-f]{64} ${uid}\n$`),
        );
        // Another server on another root hands out other uids.
        const elsewhere = (await client().exec(fresh(), { command: "id -u" })).json.stdout.trim();
        expect([uid, other[0]]).not.toContain(elsewhere);
      } else {
        expect(Number(uid)).toBe(process.getuid?.());
        expect(other[0]).toBe(uid);
        expect(readFileSync(join(root, ".registry", encodeWorkspaceId(a)), "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
      }
    } finally {
      await first.close();
    }
    const second = await startShellServer({ port: 0, workspaceRoot: root, token: "the-server-token-for-restarts" });
    try {
      const c = clientOf(second);
      await c.tokenOf(a, "token-of-workspace-a-1234");
      expect((await c.exec(a, { command: "id -u" })).json.stdout).toBe(`${before[0]}\n`);
    } finally {
      await second.close();
      await rm(root, { recursive: true, force: true });
    }
  });

  it("keeps a command from reading, listing or changing another workspace's files, HOME and TMPDIR, the root and the registry", async ({
    expect,
  }) => {
    const c = client();
    const victim = fresh();
    const intruder = fresh();
    await c.files(victim, "write", { path: "secret.txt", content: "the victim's secret" });
    await c.exec(victim, { command: 'echo home-secret > "$HOME/h.txt"; echo tmp-secret > "$TMPDIR/t.txt"' });
    const name = encodeWorkspaceId(victim);
    const attempts = [
      `cat ${sibling(victim)}/secret.txt`,
      `ls ${sibling(victim)}`,
      `echo pwned > ${sibling(victim)}/pwned`,
      `rm -f ${sibling(victim)}/secret.txt`,
      `cat ../.homes/${name}/h.txt`,
      `cat ../.tmp/${name}/t.txt`,
      "ls ..",
      "ls ../.registry",
      `cat ../.registry/${name}`,
    ];
    for (const command of attempts) {
      const answer = (await c.exec(intruder, { command })).json;
      if (IS_ROOT) {
        expect(answer.exit_code, command).not.toBe(0);
        expect(answer.stderr, command).toContain("Permission denied");
        expect(answer.stdout, command).not.toMatch(/secret|[0-9a-f]{64}/);
      } else {
        // The documented weakness: the server's user may do all of it.
        expect(answer.exit_code, `${command}: ${answer.stderr}`).toBe(0);
      }
    }
    const dir = server.workspacePath(victim);
    if (IS_ROOT) {
      expect(readFileSync(join(dir, "secret.txt"), "utf8")).toBe("the victim's secret");
      expect(existsSync(join(dir, "pwned"))).toBe(false);
      const root = statSync(server.workspaceRoot);
      expect({ uid: root.uid, mode: root.mode & 0o777 }).toEqual({ uid: 0, mode: 0o711 });
      expect(statSync(join(server.workspaceRoot, ".registry")).mode & 0o777).toBe(0o700);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
    } else {
      expect(existsSync(join(dir, "pwned"))).toBe(true);
      expect(existsSync(join(dir, "secret.txt"))).toBe(false);
    }
  });

  it("does the server's own file operations with the workspace's uid: files it writes are the workspace's, and a link to another workspace leads nowhere", async ({
    expect,
  }) => {
    const c = client();
    const victim = fresh();
    const intruder = fresh();
    await c.files(victim, "write", { path: "secret.txt", content: "the victim's secret" });
    const victimDir = server.workspacePath(victim);
    const uid = Number((await c.exec(intruder, { command: "id -u" })).json.stdout);
    await c.files(intruder, "write", { path: "sub/mine.txt", content: "mine" });
    const written = statSync(join(server.workspacePath(intruder), "sub", "mine.txt"));
    expect(written.uid).toBe(uid);
    expect(statSync(join(server.workspacePath(intruder), "sub")).uid).toBe(uid);
    if (IS_ROOT) {
      expect(written.mode & 0o077).toBe(0);
    }
    expect((await c.exec(intruder, { command: "cat sub/mine.txt" })).json.stdout).toBe("mine");
    // Links made by the workspace's own command, pointing into the victim's workspace.
    await c.exec(intruder, { command: `ln -s ${victimDir}/secret.txt leak && ln -s ${victimDir} victim` });
    const read = await c.files(intruder, "read", { path: "leak" });
    const list = await c.files(intruder, "list", { path: "victim" });
    const write = await c.files(intruder, "write", { path: "victim/pwned", content: "x" });
    const remove = await c.files(intruder, "delete", { path: "victim/secret.txt" });
    const cwd = await c.exec(intruder, { command: "ls", cwd: "victim" });
    for (const answer of [read, list, write, remove, cwd]) {
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.json.error).toBeDefined();
      expect(JSON.stringify(answer.json)).not.toContain("the victim's secret");
    }
    // As root the kernel refuses (the uid may not enter the victim's directory); the path check refuses in both cases.
    expect(["permission_denied", "path_outside_workspace"]).toContain(read.json.error.code);
    expect(existsSync(join(victimDir, "pwned"))).toBe(false);
    expect(readFileSync(join(victimDir, "secret.txt"), "utf8")).toBe("the victim's secret");
  });

  it("keeps a command from signalling another workspace's processes", async ({ expect }) => {
    const c = client();
    const victim = fresh();
    const intruder = fresh();
    await c.tokenOf(intruder);
    const running = c.exec(victim, { command: "echo $$ > pid; exec sleep 30", timeout_ms: 30_000 });
    const pidFile = join(server.workspacePath(victim), "pid");
    await vi.waitFor(() => expect(readFileSync(pidFile, "utf8")).toMatch(/^\d+\n$/), { timeout: 10_000 });
    const pid = Number(readFileSync(pidFile, "utf8"));
    const kill = (await c.exec(intruder, { command: `kill -9 ${pid}` })).json;
    if (IS_ROOT) {
      expect(kill.exit_code).not.toBe(0);
      expect(kill.stderr).toContain("Operation not permitted");
      expect(isAlive(pid)).toBe(true);
      await c.remove(victim);
    } else {
      expect(kill.exit_code).toBe(0);
    }
    expect((await running).json.signal).toBe("SIGKILL");
  });

  it("lets a command work as usual in its own workspace: files, git init and commit, npm test, its HOME and TMPDIR, a user name", async ({
    expect,
  }) => {
    const c = client();
    const ws = fresh();
    await c.files(ws, "write", { path: "notes.txt", content: "written by the server\n" });
    const test = "node -e \"require('fs').writeFileSync('ran', 'yes')\"";
    await c.files(ws, "write", {
      path: "package.json",
      content: JSON.stringify({ name: "t", version: "1.0.0", scripts: { test } }),
    });
    const script = [
      "set -e",
      "cat notes.txt",
      "echo hello > a.txt",
      "git init -q .",
      "git add -A",
      "git commit -qm first",
      "git log --format='%an %s'",
      "npm test --silent",
      "cat ran; echo",
      "git config --global user.name Someone && git config --global user.name",
      'f=$(mktemp) && case "$f" in "$TMPDIR"/*) echo private-tmp ;; esac',
      "python3 -c 'import getpass; print(bool(getpass.getuser()))'",
    ].join("\n");
    const identity = {
      GIT_AUTHOR_NAME: "Trellis",
      GIT_AUTHOR_EMAIL: "trellis@localhost",
      GIT_COMMITTER_NAME: "Trellis",
      GIT_COMMITTER_EMAIL: "trellis@localhost",
    };
    const answer = (await c.exec(ws, { command: script, env: identity, timeout_ms: 60_000 })).json;
    expect(answer.stderr).toBe("");
    expect(answer).toMatchObject({
      exit_code: 0,
      stdout: "written by the server\nTrellis first\nyes\nSomeone\nprivate-tmp\nTrue\n",
    });
    expect((await c.files(ws, "read", { path: "a.txt" })).json.content).toBe("hello\n");
    expect((await c.files(ws, "list", {})).json.entries.map((e: { path: string }) => e.path)).toEqual([
      "a.txt",
      "notes.txt",
      "package.json",
      "ran",
    ]);
    expect((await c.files(ws, "delete", { path: "ran" })).json.deleted).toBe(true);
  });

  it("ends every process of a deleted workspace, even one that left its process group", async ({ expect }) => {
    const c = client();
    const ws = fresh();
    // The command waits until its child is in a session of its own, then ends.
    const command =
      "setsid sh -c 'echo > started; exec sleep 60' </dev/null >/dev/null 2>&1 & while [ ! -e started ]; do sleep 0.01; done; echo $!";
    const answer = (await c.exec(ws, { command })).json;
    const pid = Number(answer.stdout);
    expect(pid).toBeGreaterThan(0);
    // The command has ended and its group was killed: the setsid leftover is still there.
    expect(isAlive(pid)).toBe(true);
    expect((await c.remove(ws)).json).toEqual({ deleted: true });
    if (IS_ROOT) {
      await vi.waitFor(() => expect(isAlive(pid)).toBe(false), { timeout: 5_000 });
    } else {
      // Not as root, a leftover in its own session outlives its workspace (documented); end it here.
      expect(isAlive(pid)).toBe(true);
      process.kill(pid, "SIGKILL");
    }
  });

  it("answers permission_denied for a file the workspace's own command made unreadable", async ({ expect }) => {
    const c = client();
    const ws = fresh();
    await c.exec(ws, { command: "echo x > locked && chmod 000 locked" });
    // Read with the workspace's rights (its uid, or the server's unprivileged user): never root's, which would pass.
    const read = await c.files(ws, "read", { path: "locked" });
    expect(read.status).toBe(403);
    expect(read.json.error.code).toBe("permission_denied");
  });
});

describe("shell server isolation: the uid registry survives", () => {
  it("reads a registration written without a uid (an older server) and hands its files to a new uid", async ({
    expect,
  }) => {
    const root = await mkdtemp(join(tmpdir(), "trellis-isolation-legacy-"));
    const first = await startShellServer({
      port: 0,
      workspaceRoot: root,
      token: "the-server-token-for-legacy",
      isolation: "none",
    });
    try {
      const c = clientOf(first);
      await c.tokenOf("legacy/ws", "token-of-the-legacy-ws");
      await c.files("legacy/ws", "write", { path: "kept.txt", content: "kept" });
    } finally {
      await first.close();
    }
    const file = join(root, ".registry", encodeWorkspaceId("legacy/ws"));
    expect(await readFile(file, "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
    const second = await startShellServer({ port: 0, workspaceRoot: root, token: "the-server-token-for-legacy" });
    try {
      const c = clientOf(second);
      await c.tokenOf("legacy/ws", "token-of-the-legacy-ws");
      const answer = (await c.exec("legacy/ws", { command: "cat kept.txt && echo && echo more >> kept.txt && id -u" }))
        .json;
      expect(answer.exit_code).toBe(0);
      expect(answer.stdout).toMatch(/^kept\n\d+\n$/);
      const uid = answer.stdout.split("\n")[1];
      if (IS_ROOT) {
        expect(await readFile(file, "utf8")).toMatch(new RegExp(`^[0-9a-f]{64} ${uid}\n$`));
        expect(statSync(join(second.workspacePath("legacy/ws"), "kept.txt")).uid).toBe(Number(uid));
      } else {
        expect(await readFile(file, "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
      }
    } finally {
      await second.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});
