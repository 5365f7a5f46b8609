#!/usr/bin/env node
/**
 * What a uid per workspace costs on the shell server (docs/containers.md,
 * "Local mode"): two servers in this process, one with `isolation: "uid"`
 * (needs root) and one with `"none"`, measured in alternating rounds over HTTP
 * on 127.0.0.1. Per mode: registering a workspace, its first file operation
 * (which starts the workspace's file helper when isolated), then `bash -c
 * true`, `argv: ["true"]`, a 5-byte read and a 1 KB write (10 of each per
 * workspace), deleting the workspace, and the resident memory of the file
 * helpers alive at each workspace's start.
 *
 *   node scripts/bench-shell-isolation.mjs [rounds, default 5]
 *
 * Prints one line per mode and measure: `n`, p50 and p90 (ms, or MiB).
 */
import { readdirSync, readFileSync } from "node:fs";
import { startShellServer } from "../containers/shell-server/server.mjs";

const ROUNDS = Number(process.argv[2]) || 5;
const WORKSPACES_PER_ROUND = 4;
const CALLS_PER_WORKSPACE = 10;

if (process.getuid?.() !== 0) {
  process.stderr.write('bench-shell-isolation: run as root (isolation "uid" needs it)\n');
  process.exit(2);
}

const MODES = /** @type {const} */ (["uid", "none"]);
const servers = {
  uid: await startShellServer({ port: 0, isolation: "uid" }),
  none: await startShellServer({ port: 0, isolation: "none" }),
};

/**
 * @param {Awaited<ReturnType<typeof startShellServer>>} server
 * @param {string} path
 * @param {unknown} body
 * @param {string} token
 * @param {string} [method]
 */
async function call(server, path, body, token, method = "POST") {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status !== 200) throw new Error(`${method} ${path}: ${JSON.stringify(json)}`);
  return json;
}

/** @type {Record<string, Record<string, number[]>>} */
const samples = { uid: {}, none: {} };
/**
 * @param {string} mode
 * @param {string} name
 * @param {() => Promise<unknown>} run
 */
async function time(mode, name, run) {
  const started = performance.now();
  await run();
  ((samples[mode] ??= {})[name] ??= []).push(performance.now() - started);
}

/** Resident memory (MiB) of this process's file helpers (children running file-agent.mjs), from /proc. */
function helperMemoryMiB() {
  /** @type {number[]} */
  const found = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) !== process.pid || !cmdline.includes("file-agent.mjs")) continue;
      found.push(Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024);
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

let next = 0;
for (let round = 0; round < ROUNDS; round += 1) {
  for (const mode of MODES) {
    const server = servers[mode];
    for (let w = 0; w < WORKSPACES_PER_ROUND; w += 1) {
      next += 1;
      const ws = `/v1/workspaces/bench-${next}`;
      const token = `bench-token-${next}-${"x".repeat(16)}`;
      await time(mode, "register", () => call(server, ws, { token }, server.token, "PUT"));
      await time(mode, "first file op", () =>
        call(server, `${ws}/files/write`, { path: "a.txt", content: "hello" }, token),
      );
      if (mode === "uid") ((samples.uid ??= {})["file helper RSS (MiB)"] ??= []).push(...helperMemoryMiB());
      for (let i = 0; i < CALLS_PER_WORKSPACE; i += 1) {
        await time(mode, "exec bash -c true", () => call(server, `${ws}/exec`, { command: "true" }, token));
        await time(mode, "exec argv true", () => call(server, `${ws}/exec`, { argv: ["true"] }, token));
        await time(mode, "read 5 B", () => call(server, `${ws}/files/read`, { path: "a.txt" }, token));
        await time(mode, "write 1 KB", () =>
          call(server, `${ws}/files/write`, { path: "b.txt", content: "x".repeat(1000) }, token),
        );
      }
      await time(mode, "delete", () => call(server, ws, undefined, token, "DELETE"));
    }
  }
}

/**
 * @param {number[]} values
 * @param {number} q
 */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}
for (const mode of MODES) {
  for (const [name, values] of Object.entries(samples[mode] ?? {})) {
    const unit = name.includes("MiB") ? "" : "ms";
    console.log(
      `isolation=${mode} ${name}: n=${values.length} p50=${quantile(values, 0.5).toFixed(1)}${unit} p90=${quantile(values, 0.9).toFixed(1)}${unit}`,
    );
  }
}
await servers.uid.close();
await servers.none.close();
