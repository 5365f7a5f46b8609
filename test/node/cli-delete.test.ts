import { describe, it } from "vitest";
import { deleteCommand, runsCommand } from "../../cli/commands.ts";
import { recording } from "./cli-recording.ts";

/** `trellis delete` and how `trellis runs` lists a deleted run (docs/cli.md). */

const RUN = "run_0123456789abcdef0123456789abcdef";

describe("trellis delete", () => {
  it("sends DELETE /v1/runs/{run_id} and says when the run was deleted, what it had ended with and whether it is archived", async ({
    expect,
  }) => {
    const answer = {
      run_id: RUN,
      status: "deleted",
      ended: "failed",
      deleted_at: "2026-11-28T16:20:01.532Z",
      reason: "operator",
      archived: true,
    };
    const { io, calls, printed } = recording({ [`/v1/runs/${RUN}`]: answer });
    expect(await deleteCommand(io, RUN)).toBe(0);
    expect(calls).toEqual([`DELETE /v1/runs/${RUN}`]);
    expect(printed()).toBe(`${RUN}  deleted at 2026-11-28T16:20:01.532Z (it had failed); its journal is archived\n`);
  });
});

describe("trellis runs", () => {
  it("shows a deleted run's status and when it was deleted, where a failed run shows its error", async ({ expect }) => {
    const row = (status: string, extra: Record<string, unknown>) => ({
      run_id: RUN,
      workflow: { id: "nightly", version: 3 },
      status,
      created_at: "2026-11-01T00:00:00.000Z",
      error: null,
      deleted_at: null,
      ...extra,
    });
    const listing = {
      runs: [
        row("deleted", { deleted_at: "2026-11-28T16:20:01.532Z", error: { code: "http.status" } }),
        row("failed", { error: { code: "http.status" } }),
      ],
      next_cursor: null,
    };
    const { io, printed } = recording({ "/v1/runs": listing });
    expect(await runsCommand(io, {})).toBe(0);
    expect(printed().split("\n")).toEqual([
      `${RUN}  nightly@3                 deleted    2026-11-01T00:00:00.000Z  deleted 2026-11-28T16:20:01.532Z`,
      `${RUN}  nightly@3                 failed     2026-11-01T00:00:00.000Z  http.status`,
      "",
    ]);
  });
});
