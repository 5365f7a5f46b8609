import { describe, it } from "vitest";
import { assertTransition, canTransition, isTerminal, TRANSITIONS } from "../../coordinator/lifecycle.ts";
import { EngineError } from "../../lib/errors.ts";
import { RUN_STATUSES, type RunStatus } from "../../schemas/index.ts";
import { thrown } from "./helpers.ts";

/** Every (from, to) pair of the 8 run statuses, with whether TRANSITIONS lists it. */
const PAIRS = RUN_STATUSES.flatMap((from) =>
  RUN_STATUSES.map((to) => ({ from, to, legal: (TRANSITIONS[from] as readonly RunStatus[]).includes(to) })),
);

describe("run transitions", () => {
  it("the table covers all 64 pairs of the 8 statuses", ({ expect }) => {
    expect(PAIRS).toHaveLength(64);
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...RUN_STATUSES].sort());
  });

  it.for(PAIRS)("$from → $to is legal: $legal", ({ from, to, legal }, { expect }) => {
    expect(canTransition(from, to)).toBe(legal);
    const error = thrown(() => assertTransition(from, to));
    if (legal) {
      expect(error).toBeUndefined();
    } else {
      expect(error).toBeInstanceOf(EngineError);
      expect(error).toMatchObject({
        code: "run.illegal_transition",
        retryable: false,
        message: `a run cannot go from ${from} to ${to}`,
      });
    }
  });

  it.for([
    { status: "completed", exits: [] },
    { status: "failed", exits: ["queued"] },
    { status: "cancelled", exits: [] },
  ] as const)("terminal $status has no way out but $exits", ({ status, exits }, { expect }) => {
    expect(isTerminal(status)).toBe(true);
    expect(RUN_STATUSES.filter((to) => canTransition(status, to))).toEqual(exits);
  });

  it("only completed, failed and cancelled are terminal", ({ expect }) => {
    expect(RUN_STATUSES.filter(isTerminal)).toEqual(["completed", "failed", "cancelled"]);
  });

  it("every status that is not terminal can be cancelled", ({ expect }) => {
    for (const status of RUN_STATUSES.filter((candidate) => !isTerminal(candidate))) {
      expect(canTransition(status, "cancelled"), status).toBe(true);
    }
  });

  it("nothing returns to drafting and drafting reaches running only through queued", ({ expect }) => {
    expect(RUN_STATUSES.filter((from) => canTransition(from, "drafting"))).toEqual([]);
    expect(RUN_STATUSES.filter((to) => canTransition("drafting", to))).toEqual(["queued", "cancelled"]);
  });

  it("running and waiting go both ways", ({ expect }) => {
    expect(canTransition("running", "waiting")).toBe(true);
    expect(canTransition("waiting", "running")).toBe(true);
  });
});
