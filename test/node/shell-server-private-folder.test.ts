/**
 * The shell server started from a folder only its owner may enter, with a
 * node that lives there too: a clone made as root in `mktemp -d` or `/root`,
 * with `node_modules/node`. As root, each workspace's uid cannot reach that
 * node or the file helper, so the server must stage them where it can, and
 * keep the workspaces exactly as far apart as anywhere else. Not as root, it
 * runs as before (no isolation, as documented).
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, it } from "vitest";
import { encodeWorkspaceId } from "../../containers/shell-server/server.mjs";
import { DEFAULT_UID_BASE } from "../../containers/shell-server/workspace-users.mjs";
import { copyShellServer, type ShellServerCopy } from "./shell-server-copy.ts";

const IS_ROOT = process.getuid?.() === 0;
const TOKEN = "a-token-of-sufficient-length";

let copy: ShellServerCopy | undefined;
let url: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  copy = await copyShellServer(0o700);
  const child = spawn(copy.node, [copy.server, "--watch-stdin"], {
    cwd: copy.folder,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SHELL_SERVER_TOKEN: TOKEN },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString("utf8")));
    child.once("exit", (code) => reject(new Error(`the server exited (${code}): ${stderr}`)));
  });
  url = (JSON.parse(line) as { url: string }).url;
  stop = async () => {
    child.stdin.end();
    await exited;
  };
}, 60_000);

afterAll(async () => {
  await stop?.();
  await copy?.remove();
});

async function call(path: string, body: unknown, token: string, method = "POST") {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { "authorization": `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** Registers a fresh workspace and returns its routes' prefix and token. */
async function workspace(): Promise<{ id: string; path: string; token: string }> {
  const id = `run-${crypto.randomUUID()}/dev`;
  const token = `ws-${crypto.randomUUID()}`;
  const path = `/v1/workspaces/${encodeURIComponent(id)}`;
  const registered = await call(path, { token }, TOKEN, "PUT");
  if (registered.status !== 200) {
    throw new Error(JSON.stringify(registered.json));
  }
  return { id, path, token };
}

describe(`shell server started from a folder only its owner may enter (${IS_ROOT ? "as root" : "not root"})`, () => {
  it("runs commands and file operations in a workspace, each workspace as its own uid when root", async ({
    expect,
  }) => {
    const health = await call("/healthz", undefined, TOKEN, "GET");
    expect(health.json.isolation).toBe(IS_ROOT ? "uid" : "none");
    const a = await workspace();
    const written = await call(`${a.path}/files/write`, { path: "a.txt", content: "from the server" }, a.token);
    expect(written.status).toBe(200);
    const read = await call(`${a.path}/files/read`, { path: "a.txt" }, a.token);
    expect(read.json.content).toBe("from the server");
    const ran = await call(`${a.path}/exec`, { command: "id -u; cat a.txt" }, a.token);
    expect(ran.json.exit_code).toBe(0);
    const [uid, text] = String(ran.json.stdout).split("\n");
    expect(text).toBe("from the server");
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid) >= DEFAULT_UID_BASE).toBe(IS_ROOT);
  });

  it("keeps one workspace's files from another's commands and file operations as root", async ({ expect }) => {
    const a = await workspace();
    const b = await workspace();
    await call(`${a.path}/files/write`, { path: "secret.txt", content: "a's" }, a.token);
    const peek = await call(`${b.path}/exec`, { command: `cat ../${encodeWorkspaceId(a.id)}/secret.txt` }, b.token);
    const viaLink = await call(`${b.path}/exec`, { command: `ln -s ../${encodeWorkspaceId(a.id)} a` }, b.token);
    expect(viaLink.json.exit_code).toBe(0);
    const readThroughLink = await call(`${b.path}/files/read`, { path: "a/secret.txt" }, b.token);
    if (IS_ROOT) {
      expect(peek.json.exit_code).not.toBe(0);
      expect(String(peek.json.stderr)).toContain("Permission denied");
      expect(readThroughLink.status).toBeGreaterThanOrEqual(400);
    } else {
      expect(peek.json.stdout).toBe("a's");
    }
    expect(readThroughLink.json.content).toBeUndefined();
  });
});
