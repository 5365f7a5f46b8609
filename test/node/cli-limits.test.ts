import { describe, it } from "vitest";
import { CliError } from "../../cli/api.ts";
import { entryLine, runText } from "../../cli/format.ts";
import { limitsCommand, limitStatusCommand } from "../../cli/limits.ts";
import type { RunView } from "../../schemas/index.ts";
import { recording } from "./cli-recording.ts";

/** `trellis limits`, `trellis limits status`, and a run's limits in `show` and `tail`, against a recording stand-in for the API (docs/cli.md). */

const summary = (id: string, version: number) => ({
  kind: "limits",
  id,
  version,
  created_at: "2026-03-01T00:00:00.000Z",
});
const record = (id: string, version: number, budgets: Record<string, unknown>) => ({
  ...summary(id, version),
  definition: { id, ...budgets },
});
const status = (limit: string, key: string, extra: Record<string, unknown> = {}) => ({
  limit,
  key,
  in_use: 0,
  waiting: 0,
  window: { used: 0, resets_at: null },
  paused_until: null,
  ...extra,
});

const LISTED = {
  "/v1/limits?limit=100": { definitions: [summary("api-quota", 2), summary("llm-budget", 1)], next_cursor: null },
  "/v1/limits/api-quota/versions/2": record("api-quota", 2, { concurrency: 1 }),
  "/v1/limits/api-quota/status?key=": status("api-quota", "", { in_use: 1, waiting: 1 }),
  "/v1/limits/llm-budget/versions/1": record("llm-budget", 1, {
    rate: { limit: 60, period_ms: 60_000 },
    tokens: { limit: 100_000, period_ms: 3_600_000 },
  }),
  "/v1/limits/llm-budget/status?key=": status("llm-budget", "", {
    in_use: 2,
    window: { used: 12_345, resets_at: "2026-03-02T11:00:00.000Z" },
    rate_window: { used: 3, resets_at: "2026-03-02T10:01:00.000Z" },
  }),
};

describe("trellis limits", () => {
  it('lists every limit with its budgets and its status for the key "", as a table', async ({ expect }) => {
    const { io, calls, printed } = recording(LISTED);
    expect(await limitsCommand(io)).toBe(0);
    expect(calls.sort()).toEqual(
      Object.keys(LISTED)
        .map((path) => `GET ${path}`)
        .sort(),
    );
    expect(printed().split("\n")).toEqual([
      "id            budgets                                in use  waiting  window used                                   resets at",
      "api-quota@2   concurrency 1                          1/1     1        -                                             -",
      "llm-budget@1  rate 60 per 1m · tokens 100000 per 1h  2       0        rate 3/60 per 1m, tokens 12345/100000 per 1h  2026-03-02T10:01:00.000Z, 2026-03-02T11:00:00.000Z",
      "",
    ]);
  });

  it("adds a paused until column when a limit is paused, and says when there is none", async ({ expect }) => {
    const paused = {
      ...LISTED,
      "/v1/limits/api-quota/status?key=": status("api-quota", "", { paused_until: "2026-03-02T10:00:30.000Z" }),
    };
    const { io, printed } = recording(paused);
    await limitsCommand(io);
    const [header, first, second] = printed().split("\n");
    expect(header).toMatch(/ {2}resets at +paused until$/);
    expect(first).toMatch(/ {2}2026-03-02T10:00:30\.000Z$/);
    expect(second).toMatch(/ {2}-$/);
    const none = recording({ "/v1/limits?limit=100": { definitions: [], next_cursor: null } });
    await limitsCommand(none.io);
    expect(none.printed()).toBe("no limits\n");
  });

  it("prints the limits as JSON with --json", async ({ expect }) => {
    const { io, printed } = recording(LISTED, true);
    await limitsCommand(io);
    const parsed = JSON.parse(printed()) as { limits: { id: string; version: number; status: { in_use: number } }[] };
    expect(parsed.limits.map((line) => [line.id, line.version, line.status.in_use])).toEqual([
      ["api-quota", 2, 1],
      ["llm-budget", 1, 2],
    ]);
  });

  it("refuses a status of another shape, naming where", async ({ expect }) => {
    const { io } = recording({ ...LISTED, "/v1/limits/api-quota/status?key=": { in_use: "one" } });
    const failure = limitsCommand(io);
    await expect(failure).rejects.toBeInstanceOf(CliError);
    await expect(failure).rejects.toMatchObject({ code: "cli.bad_response" });
  });
});

describe("trellis limits status", () => {
  const answers = {
    "/v1/limits/per-minute": record("per-minute", 3, { rate: { limit: 10, period_ms: 60_000 } }),
    "/v1/limits/per-minute/status?key=a+%26+b": status("per-minute", "a & b", {
      waiting: 4,
      window: { used: 10, resets_at: "2026-03-02T10:01:00.000Z" },
      paused_until: "2026-03-02T10:00:30.000Z",
    }),
    "/v1/limits/per-minute/status?key=": status("per-minute", ""),
  };

  it("prints one key's status: slots, waiting, each window with its reset, a pause", async ({ expect }) => {
    const { io, calls, printed } = recording(answers);
    expect(await limitStatusCommand(io, "per-minute", "a & b")).toBe(0);
    expect(calls.sort()).toEqual(["GET /v1/limits/per-minute", "GET /v1/limits/per-minute/status?key=a+%26+b"]);
    expect(printed()).toBe(
      [
        'per-minute@3  key "a & b"  rate 10 per 1m',
        "  in use   0",
        "  waiting  4",
        "  rate 10/10 per 1m  resets 2026-03-02T10:01:00.000Z",
        "  paused until 2026-03-02T10:00:30.000Z (a 429 with Retry-After)",
        "",
      ].join("\n"),
    );
  });

  it('asks for the key "" without --key, and prints the status itself with --json', async ({ expect }) => {
    const { io, printed } = recording(answers, true);
    await limitStatusCommand(io, "per-minute");
    expect(JSON.parse(printed())).toEqual(status("per-minute", ""));
  });
});

describe("trellis show, for a run that limits concern", () => {
  const view = (extra: Partial<RunView>): RunView => ({
    run_id: "run_1",
    workflow: { id: "fetch", version: 1 },
    status: "waiting",
    mode: "auto",
    input: {},
    output: null,
    error: null,
    created_at: "2026-03-02T10:00:00.000Z",
    updated_at: "2026-03-02T10:00:01.000Z",
    start_at: null,
    trigger: { kind: "api" },
    priority: 7,
    nodes: {},
    gates: [],
    waiting_for: [],
    usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
    parent: null,
    children: [],
    controls: [],
    ...extra,
  });

  it("prints its priority, its workflow's limits and each step waiting for a limit", ({ expect }) => {
    const text = runText(
      view({
        limits: [{ limit: "per-tenant", key: "acme", status: "held", since: "2026-03-02T10:00:00.100Z" }],
        waiting_for: [
          {
            kind: "limit",
            limit: "api-quota",
            key: "",
            since: "2026-03-02T10:00:00.500Z",
            node: "call",
            item: 2,
            step: "get",
          },
        ],
      }),
    );
    expect(text.split("\n").slice(1)).toEqual([
      "priority 7",
      '  limit per-tenant key "acme" held since 2026-03-02T10:00:00.100Z',
      '  call[2] get waits for limit api-quota key "" since 2026-03-02T10:00:00.500Z',
    ]);
  });

  it("says nothing of limits when none concerns it", ({ expect }) => {
    expect(runText(view({}))).not.toMatch(/priority|limit/);
  });
});

describe("trellis tail, at a limit's entries", () => {
  const entry = (seq: number, kind: string, body: Record<string, unknown>) => ({
    seq,
    kind,
    at: "2026-03-02T10:00:01.234Z",
    body,
  });
  const limit = { limit: { id: "api-quota", version: 2 }, limit_key: "acme" };
  const place = { node: "call", item: null, step: "get", key: "run_1/0/call/0/1/get" };

  it("names the limit and key, then the priority, the wait or the reason", ({ expect }) => {
    expect(
      [
        entry(3, "run.limit_waiting", { ...limit, priority: 7 }),
        entry(4, "run.limit_granted", { ...limit, waited_ms: 1_200 }),
        entry(9, "limit.waiting", { ...place, ...limit }),
        entry(11, "limit.granted", { ...place, ...limit, waited_ms: 2_950 }),
        entry(12, "limit.withdrawn", { ...place, ...limit, reason: "run cancelled" }),
      ].map(entryLine),
    ).toEqual([
      '10:00:01.234     #3  run.limit_waiting                       api-quota@2 key "acme"  priority 7',
      '10:00:01.234     #4  run.limit_granted                       api-quota@2 key "acme"  after 1200 ms',
      '10:00:01.234     #9  limit.waiting         call get          api-quota@2 key "acme"',
      '10:00:01.234    #11  limit.granted         call get          api-quota@2 key "acme"  after 2950 ms',
      '10:00:01.234    #12  limit.withdrawn       call get          api-quota@2 key "acme"  run cancelled',
    ]);
  });
});
