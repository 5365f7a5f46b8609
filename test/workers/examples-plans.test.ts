import { describe, it } from "vitest";
import { parse } from "yaml";
import { z } from "zod";
import dependencyPlan from "../../examples/plan-dependency.yaml?raw";
import placeholderPlan from "../../examples/plan-placeholder.yaml?raw";
import planTools from "../../examples/plan-tools.yaml?raw";
import remindLater from "../../examples/remind-later.yaml?raw";
import saga from "../../examples/saga.yaml?raw";
import waitForReply from "../../examples/wait-for-reply.yaml?raw";
import { CompensationView, JsonValue } from "../../schemas/index.ts";
import { api, journal, register, resultsOf, uniqueId, waitForRun } from "./helpers.ts";

/**
 * The plan, saga, reminder and reply examples (examples/), as files, against the local HTTP
 * target and MCP server in workerd. The end-to-end suite runs them through the
 * CLI commands their headers list (test/e2e/examples.test.mjs); this checks
 * what they are meant to show.
 */

const Echoed = z.object({ query: z.record(z.string(), JsonValue), body: JsonValue });

async function runExamplePlan(text: string) {
  await register(parse(planTools));
  const response = await api("POST", "/v1/plans", parse(text));
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return waitForRun(String(response.json.run_id));
}

describe("the plan, saga, reminder and reply examples", () => {
  it("plan-dependency.yaml joins both users' repos into one query parameter", async ({ expect }) => {
    const run = await runExamplePlan(dependencyPlan);
    expect(run.status).toBe("completed");
    const results = resultsOf(run);
    expect(results.map((result) => result.success)).toEqual([true, true, true, true]);
    const repos = ["ada", "grace"].flatMap((user) => [1, 2, 3].map((n) => `${user}-repo-${n}`));
    expect(Echoed.parse(results[2]?.data).query).toEqual({ q: `repo in (${repos.join(",")})` });
    expect(Echoed.parse(results[3]?.data).body).toMatchObject({
      text: "Searched the repos of User ada and User grace",
      repos: repos.slice(0, 3),
    });
  });

  it("plan-placeholder.yaml expands over the repos, fans out, and skips the fallback", async ({ expect }) => {
    const run = await runExamplePlan(placeholderPlan);
    expect(run.status).toBe("completed");
    const results = resultsOf(run);
    expect(results.map((result) => [result.step, result.success])).toEqual([
      ["step-01", true],
      ["step-02", true],
      ["step-03", true],
      ["step-99", false],
    ]);
    const notified = z.array(Echoed).parse(results[2]?.data);
    expect(notified.map((call) => call.body)).toEqual(
      [1, 2, 3].map((n) => ({ text: `Echo: checking ada-repo-${n} of User ada` })),
    );
    expect(results[3]?.error?.code).toBe("plan.step_skipped");
  });

  it("saga.yaml fails at ship and undoes the charge, then the reservation", async ({ expect }) => {
    await register(parse(saga));
    const started = await api("POST", "/v1/workflows/saga/runs", { input: { order: "o-17", amount: 42 } });
    expect(started.status).toBe(201);
    const run = await waitForRun(String(started.json.run_id), (view) => view.compensation?.status === "completed");
    expect(run.status).toBe("failed");
    expect(run.error.node).toBe("ship");
    const compensation = CompensationView.parse(run.compensation);
    expect(compensation.trigger).toBe("on_failure");
    // Listed in order of completion; the compensation ran them from the last.
    expect(compensation.undos.map((undo) => [undo.node, undo.action, undo.status])).toEqual([
      ["reserve", "http saga-release@1", "completed"],
      ["charge", "http saga-refund@1", "completed"],
    ]);
  });

  it("remind-later.yaml sleeps until its input's remind_at, then sends the reminder; it needs one of the two times", async ({
    expect,
  }) => {
    await register(parse(remindLater));
    const remindAt = new Date(Date.now() + 1_500).toISOString();
    const started = await api("POST", "/v1/workflows/remind-later/runs", {
      input: { message: "Stretch your legs", remind_at: remindAt },
    });
    expect(started.status).toBe(201);
    const runId = String(started.json.run_id);
    const waiting = await waitForRun(runId, (view) => view.status === "waiting");
    expect(waiting.waiting_for).toEqual([{ kind: "timer", until: remindAt, node: "remind", item: null, step: "wait" }]);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output.sent).toBe("Stretch your legs");
    expect(Date.parse(run.output.woke_at)).toBeGreaterThanOrEqual(Date.parse(remindAt));
    const kinds = (await journal(runId)).map((entry) => entry.kind);
    expect(kinds.filter((kind) => kind.startsWith("timer."))).toEqual(["timer.started", "timer.fired"]);

    const neither = await api("POST", "/v1/workflows/remind-later/runs", { input: { message: "when?" } });
    expect(neither.status).toBe(400);
  });

  it("wait-for-reply.yaml asks, lets another ticket's reply go by, takes this ticket's and records it", async ({
    expect,
  }) => {
    await register(parse(waitForReply));
    const ticket = randomTicket();
    const started = await api("POST", "/v1/workflows/wait-for-reply/runs", {
      input: { ticket_id: ticket, question: "Does the fix work for you?" },
    });
    expect(started.status).toBe(201);
    const runId = String(started.json.run_id);
    const waiting = await waitForRun(runId, (view) => view.status === "waiting");
    expect(waiting.waiting_for).toEqual([
      {
        kind: "event",
        names: ["customer.replied"],
        match: "event.data.ticket_id == input.ticket_id",
        expires_at: expect.any(String),
        node: "await_reply",
        item: null,
        step: "reply",
      },
    ]);
    const other = await api("POST", "/v1/events", { name: "customer.replied", data: { ticket_id: ticket + 1 } });
    expect(other.status).toBe(202);
    const sent = await api("POST", "/v1/events", {
      name: "customer.replied",
      data: { ticket_id: ticket, text: "Yes, all good now" },
    });
    expect(sent.status).toBe(202);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({
      asked: "Does the fix work for you?",
      outcome: "answered",
      reply: { ticket_id: ticket, text: "Yes, all good now" },
    });
    expect(run.nodes.remind.status).toBe("skipped");
    const matched = (await journal(runId)).filter((entry) => entry.kind === "event.matched");
    expect(matched.map((entry) => [entry.body.event_id, entry.body.source])).toEqual([
      [sent.json.events[0].event_id, "event"],
    ]);
  });

  it("wait-for-reply.yaml, with no reply before its timeout, goes on with the default and sends the reminder", async ({
    expect,
  }) => {
    // The example as it is, under another id, but for a timeout of half a second instead of two minutes.
    const shortened = waitForReply.replace("timeout_ms: 120000", "timeout_ms: 500");
    expect(shortened).not.toBe(waitForReply);
    const bundle = z.object({ workflows: z.tuple([z.record(z.string(), JsonValue)]) }).parse(parse(shortened));
    const id = uniqueId("wait-for-reply");
    await register({ workflows: [{ ...bundle.workflows[0], id }] });
    const started = await api("POST", `/v1/workflows/${id}/runs`, {
      input: { ticket_id: randomTicket(), question: "Does the fix work for you?" },
    });
    expect(started.status).toBe(201);
    const run = await waitForRun(String(started.json.run_id), undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({
      asked: "Does the fix work for you?",
      outcome: "reminded",
      reminded: "Does the fix work for you?",
    });
    expect(run.nodes.close.status).toBe("skipped");
    const timeouts = (await journal(run.run_id)).filter((entry) => entry.kind === "event.timeout");
    expect(timeouts.map((entry) => entry.body.on_timeout)).toEqual(["default"]);
  });
});

/** A ticket number no other test's run waits for (the events go to every run waiting for the name). */
function randomTicket(): number {
  return 1_000_000 + Math.floor(Math.random() * 1_000_000_000);
}
