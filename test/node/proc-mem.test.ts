import { spawn } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { diskUsage, liveObjects, memoryOf, statusMemory } from "../../scripts/lib/proc-mem.mjs";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) {
    rmSync(dir, { recursive: true, force: true });
  }
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "proc-mem-"));
  dirs.push(dir);
  return dir;
}

describe("proc-mem (npm run bench:events, which reads Linux's /proc)", () => {
  it("reads a process's resident memory, its anonymous part within it", () => {
    const memory = statusMemory(process.pid);
    expect(memory?.rssKiB).toBeGreaterThan(0);
    expect(memory?.anonKiB).toBeGreaterThan(0);
    expect(memory?.anonKiB).toBeLessThanOrEqual(memory?.rssKiB ?? 0);
  });

  it("counts a child's memory in the tree, and no workerd where there is none", async () => {
    const before = memoryOf(process.pid);
    // A child that holds 64 MiB resident (filled, so the pages are touched) until it is killed.
    const child = spawn(
      process.execPath,
      ["-e", "const b = Buffer.alloc(64 * 2 ** 20, 1); console.log('ready'); setInterval(() => b.length, 1000);"],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      await new Promise((resolve) => child.stdout.once("data", resolve));
      const during = memoryOf(process.pid);
      expect(during.tree.rssKiB - before.tree.rssKiB).toBeGreaterThan(64 * 1024);
      expect(during.workerd.rssKiB).toBe(0);
      expect(during.workerdPids).toEqual([]);
    } finally {
      child.kill();
    }
  });

  it("counts the Durable Objects whose SQLite file a process holds open, by class, leaving out metadata", () => {
    const state = tempDir();
    const classDir = join(state, "v3", "do", "trellis-Coordinator");
    mkdirSync(classDir, { recursive: true });
    const paths = ["a.sqlite", "a.sqlite-wal", "b.sqlite", "metadata.sqlite"].map((name) => join(classDir, name));
    const fds = paths.map((path) => openSync(path, "w"));
    try {
      expect(liveObjects([process.pid], state)).toEqual({ "trellis-Coordinator": 2 });
    } finally {
      fds.forEach((fd) => closeSync(fd));
    }
    expect(liveObjects([process.pid], state)).toEqual({});
  });

  it("adds up the files under a directory, nested ones included", () => {
    const dir = tempDir();
    mkdirSync(join(dir, "inner"));
    writeFileSync(join(dir, "one"), Buffer.alloc(1000));
    writeFileSync(join(dir, "inner", "two"), Buffer.alloc(5000));
    const usage = diskUsage(dir);
    expect(usage.files).toBe(2);
    expect(usage.bytes).toBe(6000);
    expect(usage.allocated).toBeGreaterThanOrEqual(0);
    expect(diskUsage(join(dir, "absent"))).toEqual({ files: 0, bytes: 0, allocated: 0 });
  });
});
