import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { allows, assertAllowed, CONTROLS, RUN_CONTROLS, type RunControl } from "../../coordinator/controls.ts";
import { canTransition, isTerminal } from "../../coordinator/lifecycle.ts";
import { EngineError } from "../../lib/errors.ts";
import { RUN_STATUSES, type RunRecord, type RunStatus } from "../../schemas/index.ts";
import type { Coordinator } from "../../coordinator/index.ts";
import { api } from "./helpers.ts";

/** The status each control moves a run to (null: none; a compensation leaves the run's status as it is). */
const MOVES_TO = {
  cancel: "cancelled",
  pause: "paused",
  resume: "running",
  redrive: "queued",
  approve: "queued",
  compensate: null,
} as const satisfies Record<RunControl, RunStatus | null>;

/** A run record in `status` with nothing else to say (no undos, no compensation). */
function recordIn(status: RunStatus, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: "run_x",
    workflow: { id: "w", version: 1 },
    status,
    mode: "auto",
    context: { input: null, state: {}, output: {} },
    error: null,
    created_at: 0,
    updated_at: 0,
    deadline_at: null,
    dispatch_count: 0,
    usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
    gates: [],
    depth: 0,
    parent: null,
    created_by: "rpc",
    inherited_resources: {},
    redrives: 0,
    journal_seq: 1,
    idempotency_key: null,
    request_hash: "",
    ...extra,
  };
}

const CASES = (Object.keys(CONTROLS) as RunControl[]).flatMap((control) =>
  RUN_STATUSES.map((status) => ({ control, status, allowed: allows(control, recordIn(status)) })),
);

describe("run controls", () => {
  it("every status a control allows may make the control's move in the lifecycle", ({ expect }) => {
    for (const { control, status, allowed } of CASES) {
      const to = MOVES_TO[control];
      if (allowed && to !== null) {
        expect(canTransition(status, to), `${control} from ${status}`).toBe(true);
      }
    }
  });

  it("cancel is allowed exactly while the run has not ended", ({ expect }) => {
    for (const status of RUN_STATUSES) {
      expect(allows("cancel", recordIn(status))).toBe(!isTerminal(status));
    }
  });

  it.for(CASES.filter((entry) => !entry.allowed))(
    "$control is refused in $status with the row's message (or its guard's)",
    ({ control, status }, { expect }) => {
      let thrown: unknown;
      try {
        assertAllowed(control, recordIn(status));
      } catch (error) {
        thrown = error;
      }
      const row: { statuses: readonly RunStatus[]; guard?: (record: RunRecord) => string | null } = CONTROLS[control];
      expect(thrown).toBeInstanceOf(EngineError);
      expect(thrown).toMatchObject({
        code: isTerminal(status) ? "run.terminal" : "run.conflict",
        message: row.statuses.includes(status)
          ? (row.guard?.(recordIn(status)) ?? "")
          : `${CONTROLS[control].refusal} ${status}`,
      });
    },
  );

  it("compensate needs undos and no compensation yet; redrive of a cancelled run only resumes a failed compensation", ({
    expect,
  }) => {
    const undo = {
      node: "a",
      item: null,
      step: "s",
      seq: 3,
      action: "http undo@1",
      input: {},
      status: "enqueued" as const,
      attempts: 0,
      token: null,
      deadline_at: null,
      retry_at: null,
      error: null,
    };
    const compensation = (status: "running" | "completed" | "failed") => ({
      status,
      trigger: "on_failure" as const,
      started_at: 0,
      finished_at: null,
    });
    expect(allows("compensate", recordIn("failed", { undos: [undo] }))).toBe(true);
    expect(allows("compensate", recordIn("cancelled", { undos: [undo] }))).toBe(true);
    expect(allows("compensate", recordIn("failed"))).toBe(false);
    expect(allows("compensate", recordIn("failed", { undos: [undo], compensation: compensation("failed") }))).toBe(
      false,
    );
    expect(allows("redrive", recordIn("cancelled", { undos: [undo] }))).toBe(false);
    expect(allows("redrive", recordIn("cancelled", { undos: [undo], compensation: compensation("failed") }))).toBe(
      true,
    );
    expect(allows("redrive", recordIn("failed", { undos: [undo], compensation: compensation("completed") }))).toBe(
      false,
    );
    expect(allows("redrive", recordIn("failed", { undos: [undo] }))).toBe(true);
  });
});

describe("run controls over HTTP and RPC", () => {
  it("every row of the table is a route: POST /v1/runs/{id}/{control}", async ({ expect }) => {
    for (const control of RUN_CONTROLS) {
      const response = await api("POST", `/v1/runs/run_00000000000000000000000000000000/${control}`, {});
      // The route exists and reached the (absent) run, rather than the router's 404.
      expect(response.json.error?.code, control).toBe("run.not_found");
    }
  });

  it("a control the table does not have is refused by the coordinator as data", async ({ expect }) => {
    // The generated stub type is too deep for tsc over recursive JSON types (as in src/service.ts).
    const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName("run_no_such_control")) as unknown as Pick<
      Coordinator,
      "control"
    >;
    const result = await stub.control("reboot" as RunControl);
    expect(result).toMatchObject({ ok: false, error: { code: "run.invalid_control", retryable: false } });
  });
});
