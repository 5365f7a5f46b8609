import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

// The peer benchmark's target (scripts/peerbench/target.mjs) runs as a process of its own, as the benchmark starts it.
const script = new URL("../../scripts/peerbench/target.mjs", import.meta.url).pathname;
let child: ChildProcessWithoutNullStreams;
let url: string;

type Log = { arrived: number[]; answered: number[]; now: number };
const readLog = async (): Promise<Log> => (await (await fetch(`${url}/log`)).json()) as Log;

beforeAll(async () => {
  child = spawn(process.execPath, [script], { stdio: ["pipe", "pipe", "pipe"] });
  const lines = createInterface({ input: child.stdout });
  const [first] = (await once(lines, "line")) as [string];
  url = first;
});
afterAll(async () => {
  const exited = once(child, "exit");
  child.stdin.end(); // the target stops when its stdin closes
  await exited;
});
beforeEach(async () => {
  await fetch(`${url}/log/clear`, { method: "POST" });
});

describe("peer benchmark target", () => {
  it("prints a loopback URL as its first line", () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("answers GET /now at once with the time, and counts each one", async () => {
    const before = Date.now();
    const responses = await Promise.all([1, 2, 3].map(async () => fetch(`${url}/now`)));
    for (const response of responses) {
      expect(response.status).toBe(200);
      const { now } = (await response.json()) as { now: number };
      expect(now).toBeGreaterThanOrEqual(before);
      expect(now).toBeLessThanOrEqual(Date.now());
    }
    const log = await readLog();
    expect(log.now).toBe(3);
    expect(log.arrived).toEqual([]); // /now is not a /sleep: the fan-out's log stays as it was
  });

  it("clears the /now count with the log", async () => {
    await (await fetch(`${url}/now`)).text();
    expect((await readLog()).now).toBe(1);
    expect((await fetch(`${url}/log/clear`, { method: "POST" })).status).toBe(204);
    expect(await readLog()).toEqual({ arrived: [], answered: [], now: 0 });
  });

  it("answers GET /sleep?ms=N after N ms and logs when it arrived and was answered", async () => {
    const started = Date.now();
    const response = await fetch(`${url}/sleep?ms=30`);
    expect(await response.json()).toEqual({ slept: 30 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(29); // Date.now() has 1 ms steps
    const log = await readLog();
    expect(log.arrived).toHaveLength(1);
    expect(log.answered).toHaveLength(1);
    expect((log.answered[0] ?? 0) - (log.arrived[0] ?? 0)).toBeGreaterThanOrEqual(29);
    expect(log.now).toBe(0);
  });
});
