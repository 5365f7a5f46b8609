import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { UsageMeter, type RunUsage } from "../../coordinator/usage.ts";
import { httpStep, httpTarget, register, runWorkflow, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * A chain of `length` nodes, each after the one before: a pure task (one `context` step that
 * sets `v`; the coordinator runs it) or an `http` task (a GET of the local target; the executor runs it).
 */
function chain(length: number, kind: "pure" | "http" = "pure"): Record<string, unknown> {
  const step =
    kind === "pure"
      ? { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }
      : httpStep("s", `${httpTarget()}/echo`);
  const task = { steps: [step] };
  return Object.fromEntries(
    Array.from({ length }, (_, i) => [`n${i}`, { task, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) }]),
  );
}

/** The coordinator's usage counters when the run ended. */
async function usageAtEnd(runId: string): Promise<RunUsage> {
  const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as {
    getStats(): Promise<{ usageAtEnd: RunUsage | null }>;
  };
  const { usageAtEnd } = await stub.getStats();
  if (usageAtEnd === null) {
    throw new Error(`run ${runId} has no usage at its end`);
  }
  return usageAtEnd;
}

describe("a run's usage", () => {
  it("counts executor calls, rows and bytes; the same run twice counts the same; more nodes write more rows", async ({
    expect,
  }) => {
    const three = { id: uniqueId("usage-3"), nodes: chain(3, "http") };
    const six = { id: uniqueId("usage-6"), nodes: chain(6, "http") };
    const first = await runWorkflow(three);
    const second = await runWorkflow(three);
    const longer = await runWorkflow(six);
    expect([first.status, second.status, longer.status]).toEqual(["completed", "completed", "completed"]);
    const a = await usageAtEnd(first.run_id);
    const b = await usageAtEnd(second.run_id);
    const c = await usageAtEnd(longer.run_id);
    // One executor call per node of a chain of http tasks; rows read and written by its statements; a database of some size.
    expect(a.executorCalls).toBe(3);
    expect(c.executorCalls).toBe(6);
    expect(a.rowsWritten).toBeGreaterThan(3);
    expect(a.rowsRead).toBeGreaterThan(0);
    expect(a.databaseBytes).toBeGreaterThan(0);
    // Deterministic: a second identical run costs exactly the same, but for the run index's
    // outbox, whose rows follow D1's answers (at most one more read-back and mark).
    const apart = ({ indexRowsRead, indexRowsWritten, ...rest }: RunUsage) => ({
      ...rest,
      rowsRead: rest.rowsRead - indexRowsRead,
      rowsWritten: rest.rowsWritten - indexRowsWritten,
    });
    expect(apart(b)).toEqual(apart(a));
    expect(Math.abs(b.indexRowsWritten - a.indexRowsWritten)).toBeLessThanOrEqual(1);
    // Rows written grow with the nodes: three more nodes write at least a row each.
    expect(c.rowsWritten - a.rowsWritten).toBeGreaterThanOrEqual(3);
    expect(c.rowsRead).toBeGreaterThan(a.rowsRead);
  });

  it("writes at most 4.5 rows a node of a chain: one journal row a commit, a node's one invocation in its row, a short context in the record", async ({
    expect,
  }) => {
    const run = await runWorkflow({ id: uniqueId("usage-50"), nodes: chain(50, "http") });
    expect(run.status).toBe("completed");
    const usage = await usageAtEnd(run.run_id);
    // Each node's commit writes its journal entries (one row), the node it ends and the node it
    // starts (a row each), the run's record and its context; the run's start and end add a few.
    expect(usage.rowsWritten / 50).toBeLessThanOrEqual(4.5); // 4.4 when measured (220 rows); 11.5 before
  });

  it("runs a chain of pure tasks with no executor call, in one commit of about a row a node", async ({ expect }) => {
    const run = await runWorkflow({ id: uniqueId("usage-pure-50"), nodes: chain(50) });
    expect(run.status).toBe("completed");
    const usage = await usageAtEnd(run.run_id);
    expect(usage.executorCalls).toBe(0);
    // Each node's row, the journal's pages, the run's record and context, and the run index.
    expect(usage.rowsWritten / 50).toBeLessThanOrEqual(1.5);
  });

  it("counts a child run's start as calls into Durable Objects, and a sleep's alarm", async ({ expect }) => {
    const child = { id: uniqueId("usage-child"), nodes: chain(1) };
    const parent = {
      id: uniqueId("usage-parent"),
      nodes: {
        sub: {
          task: { steps: [{ ref: "sub", action: { kind: "workflow", implementation: { workflow: child.id } } }] },
        },
        nap: {
          depends_on: ["sub"],
          task: { steps: [{ ref: "nap", action: { kind: "sleep", implementation: { duration_ms: 50 } } }] },
        },
      },
    };
    await register({ workflows: [child, parent] });
    const run = await waitForRun(await start(parent.id));
    expect(run.status).toBe("completed");
    const usage = await usageAtEnd(run.run_id);
    // The child's start is two calls (the catalog, then the child's coordinator); the sleep ends on an alarm.
    expect(usage.objectCalls).toBeGreaterThanOrEqual(2);
    expect(usage.alarms).toBeGreaterThanOrEqual(1);
    expect(usage.alarmsSet).toBeGreaterThanOrEqual(1);
  });
});

describe("the run usage log line", () => {
  /** The `run usage` lines a meter logs as a run goes from running to completed. */
  function linesLogged(meter: UsageMeter): string[] {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      meter.logIfEnded("running", { run_id: "run_usage_line", status: "completed" });
      return log.mock.calls.map((args) => String(args[0])).filter((line) => line.includes('"msg":"run usage"'));
    } finally {
      log.mockRestore();
    }
  }

  it("is written when the meter counts the object's storage (USAGE_METER=on)", async ({ expect }) => {
    const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName(uniqueId("usage-line")));
    const lines = await runInDurableObject(stub, (_instance, state) => {
      const meter = new UsageMeter();
      meter.state(state);
      return linesLogged(meter);
    });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "{}")).toMatchObject({
      run_id: "run_usage_line",
      status: "completed",
      rowsWritten: 0,
    });
  });

  it("is not written when nothing was counted (USAGE_METER off): no line of zeros", async ({ expect }) => {
    const meter = new UsageMeter();
    expect(linesLogged(meter)).toEqual([]);
    expect(meter.readAtEnd()).toBeNull();
  });
});
