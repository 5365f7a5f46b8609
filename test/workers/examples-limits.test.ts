import { describe, it } from "vitest";
import { parse } from "yaml";
import summarizeUnderBudget from "../../examples/summarize-under-budget.yaml?raw";
import { api, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * examples/summarize-under-budget.yaml, as the file, against the local LLM
 * server in workerd (the end-to-end suite runs the CLI commands of its header).
 */
describe("the summarize-under-budget example", () => {
  it("registers its limit, model, action and workflow, and summarizes every document", async ({ expect }) => {
    const registered = await api("POST", "/v1/definitions", parse(summarizeUnderBudget));
    expect(registered.status).toBe(201);
    expect(registered.json.created.map((created: { kind: string }) => created.kind).sort()).toEqual([
      "actions",
      "limits",
      "models",
      "prompts",
      "workflows",
    ]);
    const documents = ["one report", "two invoices", "three tickets", "four emails", "five notes"];
    const runId = await start("summarize-under-budget", { input: { tenant: uniqueId("tenant"), documents } });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output.summaries).toHaveLength(documents.length);
    expect(run.usage.input_tokens).toBeGreaterThan(0);
  });
});
