import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { allows, assertAllowed, CONTROLS, RUN_CONTROLS, type RunControl } from "../../coordinator/controls.ts";
import { canTransition, isTerminal } from "../../coordinator/lifecycle.ts";
import { EngineError } from "../../lib/errors.ts";
import { RUN_STATUSES, type RunStatus } from "../../schemas/index.ts";
import type { Coordinator } from "../../coordinator/index.ts";
import { api } from "./helpers.ts";

/** The status each control moves a run to. */
const MOVES_TO = {
  cancel: "cancelled",
  pause: "paused",
  resume: "running",
  redrive: "queued",
  approve: "queued",
} as const satisfies Record<RunControl, RunStatus>;

const CASES = (Object.keys(CONTROLS) as RunControl[]).flatMap((control) =>
  RUN_STATUSES.map((status) => ({ control, status, allowed: allows(control, status) })),
);

describe("run controls", () => {
  it("every status a control allows may make the control's move in the lifecycle", ({ expect }) => {
    for (const { control, status, allowed } of CASES) {
      if (allowed) {
        expect(canTransition(status, MOVES_TO[control]), `${control} from ${status}`).toBe(true);
      }
    }
  });

  it("cancel is allowed exactly while the run has not ended", ({ expect }) => {
    for (const status of RUN_STATUSES) {
      expect(allows("cancel", status)).toBe(!isTerminal(status));
    }
  });

  it.for(CASES.filter((entry) => !entry.allowed))(
    "$control is refused in $status with the row's message",
    ({ control, status }, { expect }) => {
      let thrown: unknown;
      try {
        assertAllowed(control, status);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(EngineError);
      expect(thrown).toMatchObject({
        code: isTerminal(status) ? "run.terminal" : "run.conflict",
        message: `${CONTROLS[control].refusal} ${status}`,
      });
    },
  );
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
