// The web console's pure parts (console/src): the SSE parser that reads the
// event stream, the DAG layout, the form built from a JSON Schema, the
// journal timeline's summaries and what a waiting run waits for. The console
// as a whole is driven in a real browser by test/e2e/console.test.mjs.
import { describe, expect, test } from "vitest";
import { layersOf, layoutDag, NODE_WIDTH_PX } from "../../console/src/dag-layout.ts";
import { childrenByNode, summarizeEntry } from "../../console/src/journal-summary.ts";
import { limitHref, parseRoute } from "../../console/src/routes.ts";
import {
  formatCountdown,
  formatWaited,
  gateAnchor,
  signalAnswerText,
  toSignalBody,
  waitPlace,
} from "../../console/src/waits.ts";
import { fieldsOf, valueOf } from "../../console/src/schema-fields.ts";
import { SseParser } from "../../console/src/sse.ts";

describe("SseParser", () => {
  test("splits events across arbitrary chunk boundaries and keeps the last id", () => {
    const stream =
      'id: 1\nevent: run.created\ndata: {"seq":1}\n\n: keep-alive\n\nid: 2\r\nevent: attest\r\ndata: {"seq":2}\r\n\r\n';
    for (let cut = 1; cut < stream.length; cut++) {
      const parser = new SseParser();
      const events = [...parser.push(stream.slice(0, cut)), ...parser.push(stream.slice(cut))];
      expect(events, `cut at ${cut}`).toEqual([
        { id: "1", event: "run.created", data: '{"seq":1}' },
        { id: "2", event: "attest", data: '{"seq":2}' },
      ]);
    }
  });

  test("joins multi-line data and ignores comments and unknown fields", () => {
    const parser = new SseParser();
    expect(parser.push("data: a\ndata:b\nretry: 5\n: note\n\n")).toEqual([
      { id: null, event: "message", data: "a\nb" },
    ]);
  });
});

describe("layoutDag", () => {
  const nodes = [
    { id: "prepare", dependsOn: [] },
    { id: "fan", dependsOn: ["prepare"] },
    { id: "ask", dependsOn: ["prepare"] },
    { id: "finish", dependsOn: ["ask", "fan"] },
  ];

  test("puts each node one column right of its deepest dependency", () => {
    expect(Object.fromEntries(layersOf(nodes))).toEqual({ prepare: 0, fan: 1, ask: 1, finish: 2 });
    expect(
      layersOf([
        { id: "late", dependsOn: ["a"] },
        { id: "a", dependsOn: ["b"] },
        { id: "b", dependsOn: [] },
      ]).get("late"),
    ).toBe(2);
  });

  test("places nodes in columns and rows and draws one edge per dependency", () => {
    const layout = layoutDag(nodes);
    const at = Object.fromEntries(layout.nodes.map((node) => [node.id, node]));
    expect(at["fan"]?.x).toBe(at["ask"]?.x);
    expect(at["fan"]?.y).toBeLessThan(at["ask"]?.y ?? 0);
    expect(at["finish"]?.x).toBeGreaterThan((at["ask"]?.x ?? 0) + NODE_WIDTH_PX);
    expect(layout.edges.map((edge) => `${edge.from}->${edge.to}`)).toEqual([
      "prepare->fan",
      "prepare->ask",
      "ask->finish",
      "fan->finish",
    ]);
    expect(layout.width).toBeGreaterThan((at["finish"]?.x ?? 0) + NODE_WIDTH_PX - 1);
  });

  test("ignores unknown dependencies and survives a cycle", () => {
    expect(layoutDag([{ id: "a", dependsOn: ["ghost"] }]).edges).toEqual([]);
    const cyclic = layersOf([
      { id: "a", dependsOn: ["b"] },
      { id: "b", dependsOn: ["a"] },
    ]);
    expect(cyclic.size).toBe(2);
  });
});

describe("a form from a JSON Schema", () => {
  const schema = {
    type: "object",
    required: ["ok", "count"],
    properties: {
      ok: { type: "boolean" },
      note: { type: "string", title: "Note", description: "why" },
      count: { type: "integer" },
      level: { enum: ["low", "high"] },
      extra: { type: "object" },
    },
  };

  test("has one typed field per property", () => {
    expect(fieldsOf(schema).map((f) => [f.name, f.label, f.kind, f.required])).toEqual([
      ["ok", "ok", "boolean", true],
      ["note", "Note", "text", false],
      ["count", "count", "integer", true],
      ["level", "level", "choice", false],
      ["extra", "extra", "json", false],
    ]);
    expect(fieldsOf(schema)[3]?.choices).toEqual(['"low"', '"high"']);
  });

  test("builds the value, leaving out empty optional fields", () => {
    const fields = fieldsOf(schema);
    expect(valueOf(fields, { ok: true, count: "3", level: '"high"', extra: '{"a":1}', note: "" })).toEqual({
      ok: true,
      value: { ok: true, count: 3, level: "high", extra: { a: 1 } },
    });
    expect(valueOf(fields, {})).toEqual({ ok: false, errors: [{ field: "count", message: "required" }] });
    expect(valueOf(fields, { count: "1.5", extra: "{" })).toEqual({
      ok: false,
      errors: [
        { field: "count", message: "not a whole number" },
        { field: "extra", message: "not valid JSON" },
      ],
    });
  });

  test("a schema that is not an object of properties is one JSON field, optional when it accepts anything", () => {
    const list = fieldsOf({ type: "array" });
    expect(list.map((f) => [f.name, f.kind, f.required])).toEqual([["", "json", true]]);
    expect(valueOf(list, { "": "[1, 2]" })).toEqual({ ok: true, value: [1, 2] });
    expect(valueOf(list, { "": "" })).toEqual({ ok: false, errors: [{ field: "Value (JSON)", message: "required" }] });
    expect(valueOf(fieldsOf({}), { "": "" })).toEqual({ ok: true, value: {} });
  });
});

describe("journal timeline lines", () => {
  test("summarize entries per kind with their node and step", () => {
    expect(summarizeEntry("run.status", { from: "running", to: "waiting", reason: "r" })).toEqual({
      node: null,
      step: null,
      summary: "running → waiting: r",
    });
    expect(
      summarizeEntry("gate.opened", { gate_id: "gate_1", node: "ask", step: "approve", expires_at: null }),
    ).toEqual({ node: "ask", step: "approve", summary: "gate_1 opened" });
    expect(
      summarizeEntry("task.failed", { node: "n", attempt: 2, item: 0, error: { code: "x.y", message: "m" } }).summary,
    ).toBe("attempt 2 item 0: x.y: m");
    const timer = { node: "remind", item: null, step: "nap", key: "run_1/0/remind/0/1/nap" };
    expect(summarizeEntry("timer.started", { ...timer, until: "2026-12-01T08:00:00.000Z" })).toEqual({
      node: "remind",
      step: "nap",
      summary: "sleeps until 2026-12-01T08:00:00.000Z",
    });
    expect(summarizeEntry("timer.fired", { ...timer, item: 2, slept_ms: 60_004 }).summary).toBe(
      "item 2 woke after 60004 ms",
    );
    expect(summarizeEntry("timer.cancelled", { ...timer, reason: "run cancelled" }).summary).toBe(
      "sleep cancelled: run cancelled",
    );
    expect(summarizeEntry("some.new_kind", { a: "x".repeat(400) }).summary).toHaveLength(160);
    expect(summarizeEntry("erased", { reason: "asked", seqs: [1, 4], blobs: [] }).summary).toBe(
      "asked (the values of 2 entries, 0 blobs)",
    );
  });

  test("summarize an event wait: what it waits for, what it took, its timeout, its cancelling, and a signal", () => {
    const wait = { node: "await_reply", item: null, step: "reply", key: "run_1/0/await_reply/0/1/reply" };
    expect(
      summarizeEntry("event.waiting", {
        ...wait,
        names: ["customer.replied", "customer.closed"],
        match: "event.data.ticket_id == input.ticket_id",
        expires_at: "2026-12-01T08:00:00.000Z",
        lookback_ms: 0,
      }),
    ).toEqual({
      node: "await_reply",
      step: "reply",
      summary:
        "waits for customer.replied or customer.closed where event.data.ticket_id == input.ticket_id " +
        "until 2026-12-01T08:00:00.000Z",
    });
    expect(
      summarizeEntry("event.waiting", { ...wait, item: 1, names: ["tick"], expires_at: null, lookback_ms: 60_000 })
        .summary,
    ).toBe("item 1 waits for tick, looking back 60000 ms");
    const matched = { ...wait, name: "customer.replied", received_at: "2026-12-01T07:00:00.000Z", data_sha256: "ab" };
    expect(summarizeEntry("event.matched", { ...matched, event_id: "reply-7", source: "signal" }).summary).toBe(
      "took signal customer.replied (reply-7)",
    );
    expect(summarizeEntry("event.matched", { ...matched, event_id: "evt_1", source: "event" }).summary).toBe(
      "took event customer.replied (evt_1)",
    );
    expect(summarizeEntry("event.timeout", { ...wait, on_timeout: "default" }).summary).toBe(
      "timed out waiting; goes on with the default",
    );
    expect(summarizeEntry("event.timeout", { ...wait, item: 0, on_timeout: "fail" }).summary).toBe(
      "item 0 timed out waiting; fails",
    );
    expect(summarizeEntry("event.cancelled", { ...wait, reason: "run cancelled" }).summary).toBe(
      "wait cancelled: run cancelled",
    );
    expect(summarizeEntry("event.declined", { ...wait, event_id: "evt_3", name: "paid" }).summary).toBe(
      "declined paid (evt_3): its match does not take it; still waiting",
    );
    expect(
      summarizeEntry("signal.received", { event_id: "evt_2", name: "customer.replied", data_sha256: "ab" }),
    ).toEqual({ node: null, step: null, summary: "signal customer.replied (evt_2) received" });
  });

  test("summarize a step's limit wait and a run's workflow limits: which limit and key, the wait, the priority", () => {
    const place = { node: "call", item: null, step: "get", key: "run_1/0/call/0/1/get" };
    const limit = { limit: { id: "api-quota", version: 2 }, limit_key: "acme" };
    expect(summarizeEntry("limit.waiting", { ...place, ...limit })).toEqual({
      node: "call",
      step: "get",
      summary: 'waits for room in limit api-quota@2, key "acme"',
    });
    expect(summarizeEntry("limit.granted", { ...place, item: 3, ...limit, waited_ms: 2_950 }).summary).toBe(
      'item 3 served by limit api-quota@2, key "acme", after 2950 ms',
    );
    expect(summarizeEntry("limit.withdrawn", { ...place, ...limit, reason: "run cancelled" }).summary).toBe(
      'stopped waiting for limit api-quota@2, key "acme": run cancelled',
    );
    const run = { limit: { id: "runs-per-tenant", version: 1 }, limit_key: "" };
    expect(summarizeEntry("run.limit_waiting", { ...run, priority: 7 }).summary).toBe(
      'queued for limit runs-per-tenant@1, key "", at priority 7',
    );
    expect(summarizeEntry("run.limit_granted", { ...run, waited_ms: 0 }).summary).toBe(
      'holds limit runs-per-tenant@1, key "", after 0 ms',
    );
  });

  test("list the child runs each node started", () => {
    const entries = [
      { kind: "child.started", body: { node: "sub", child_run_id: "run_a" } },
      { kind: "child.finished", body: { node: "sub", child_run_id: "run_a" } },
      { kind: "child.started", body: { node: "sub", child_run_id: "run_b" } },
    ];
    expect([...childrenByNode(entries)]).toEqual([["sub", ["run_a", "run_b"]]]);
  });
});

describe("what a run waits for", () => {
  test("a timer's (or an event wait's) time left, to the second, rounded up; null once due", () => {
    expect(
      [0, -5, 1, 999, 1_000, 59_001, 60_000, 65_000, 3_599_000, 3_600_000, 7_390_000, 86_400_000, 273_120_000].map(
        formatCountdown,
      ),
    ).toEqual([
      null,
      null,
      "1s",
      "1s",
      "1s",
      "1m 00s",
      "1m 00s",
      "1m 05s",
      "59m 59s",
      "1h 00m 00s",
      "2h 03m 10s",
      "1d 00h 00m",
      "3d 03h 52m",
    ]);
  });

  test("where a wait is, and the anchor of a gate's card", () => {
    const at = { node: "remind", item: null, step: "nap" };
    expect(waitPlace({ kind: "timer", until: "2026-12-01T08:00:00.000Z", ...at }, null)).toBe("remind / nap");
    expect(waitPlace({ kind: "gate", gate_id: "gate_2", ...at, item: 3 }, null)).toBe("remind[3] / nap");
    expect(waitPlace({ kind: "child", run_id: null, workflow: "w@1", node: "sub", item: null, step: null }, null)).toBe(
      "sub",
    );
    const plan = [{ id: "step-2", tool: "remind", dependsOn: [] }];
    expect(waitPlace({ kind: "gate", gate_id: "gate_1", node: "step-2", item: null, step: "call" }, plan)).toBe(
      "step-2 / step-2 (remind)",
    );
    expect(gateAnchor("gate_1")).toBe("gate-gate_1");
  });

  test("how long a wait has gone on, to the second, rounded down; null under a second", () => {
    expect([0, 999, 1_000, 1_999, 65_400, 3_600_000].map(formatWaited)).toEqual([
      null,
      null,
      "1s",
      "1s",
      "1m 05s",
      "1h 00m 00s",
    ]);
  });

  test("a limit wait's place, and its link to the Limits page at its limit and key", () => {
    const wait = { kind: "limit" as const, limit: "api-quota", key: "acme", since: "2026-12-01T08:00:00.000Z" };
    expect(waitPlace({ ...wait, node: "call", item: 2, step: "get" }, null)).toBe("call[2] / get");
    const href = limitHref("api-quota", "a&b =");
    expect(href).toBe("/limits?limit=api-quota&key=a%26b+%3D");
    const [path, search] = href.split("?");
    const route = parseRoute(path ?? "", `?${search ?? ""}`);
    expect(route.page === "limits" && [route.query.get("limit"), route.query.get("key")]).toEqual([
      "api-quota",
      "a&b =",
    ]);
  });
});

describe("a signal sent from the run page", () => {
  test("carries the name, the data parsed as JSON and the id, leaving out what is empty", () => {
    expect(toSignalBody("customer.replied", ' {"ticket_id": 7} ', " reply-7 ")).toEqual({
      ok: true,
      body: { name: "customer.replied", data: { ticket_id: 7 }, id: "reply-7" },
    });
    expect(toSignalBody("tick", "  ", "")).toEqual({ ok: true, body: { name: "tick" } });
    expect(toSignalBody("tick", "null", "")).toEqual({ ok: true, body: { name: "tick", data: null } });
  });

  test("refuses data that is not JSON, saying so", () => {
    const refused = toSignalBody("tick", "{ticket_id: 7}", "");
    expect(refused.ok).toBe(false);
    expect(refused.ok ? "" : refused.error).toMatch(/^Data is not JSON: ./);
  });

  test("says what became of it", () => {
    expect(signalAnswerText({ event_id: "evt_1", duplicate: false })).toBe("accepted as evt_1");
    expect(signalAnswerText({ event_id: "reply-7", duplicate: true })).toBe(
      "duplicate: reply-7 was accepted before, so this one changed nothing",
    );
  });
});

describe("routes", () => {
  test("every page has an address that can be loaded directly", () => {
    const runs = parseRoute("/", "?status=waiting&workflow=greet");
    expect(runs.page === "runs" && runs.query.get("status")).toBe("waiting");
    expect(parseRoute("/runs/run_abc", "")).toEqual({ page: "run", runId: "run_abc" });
    expect(parseRoute("/workflows", "")).toEqual({ page: "workflows" });
    expect(parseRoute("/workflows/my%20flow/", "")).toEqual({ page: "workflow", id: "my flow" });
    const limits = parseRoute("/limits", "");
    expect(limits.page === "limits" && limits.query.size).toBe(0);
  });

  test("anything else is not found, a malformed escape included", () => {
    for (const path of ["/runs", "/runs/a/b", "/workflows/a/b", "/limits/a", "/nope", "/runs/%E0%A4%A"]) {
      expect(parseRoute(path, "")).toEqual({ page: "not_found", path });
    }
  });
});
