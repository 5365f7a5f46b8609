import { describe, it } from "vitest";
import { RunView } from "../../schemas/api.ts";
import { api, httpTarget, register, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * A failed run whose undos ran to the end cannot be redriven (its work is
 * undone): the 409 says which policy ran them and how to choose another
 * (docs/definitions.md, "Undo and compensation"; docs/api.md, redrive).
 */

/** A workflow whose node makes an item (an action with an undo), then fails; `policy` is its `compensate`. */
function failingSaga(policy?: string) {
  const remove = uniqueId("remove");
  const make = uniqueId("make");
  const actions = [
    { id: remove, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/json?undo={{id}}` } },
    {
      id: make,
      kind: "http",
      implementation: { method: "GET", url_template: `${httpTarget()}/json?id={{id}}` },
      undo: { action: remove, input_mapping: { id: "$.output.body.id" } },
    },
  ];
  const steps = [
    { ref: "make", action: make, input_mapping: { id: "x" } },
    {
      ref: "boom",
      action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
    },
  ];
  const workflow = {
    id: uniqueId("saga"),
    ...(policy === undefined ? {} : { compensate: policy }),
    nodes: { a: { task: { steps } } },
  };
  return { actions, workflows: [workflow], id: workflow.id };
}

/** Registers and runs the saga until `until` holds of its view; returns the view. */
async function runSaga(bundle: ReturnType<typeof failingSaga>, until: (view: RunView) => boolean): Promise<RunView> {
  await register({ actions: bundle.actions, workflows: bundle.workflows });
  return RunView.parse(await waitForRun(await start(bundle.id), (json) => until(RunView.parse(json))));
}

const compensated = (view: RunView) => view.compensation?.status === "completed";

describe("redrive of a run whose compensation completed", () => {
  it('under the default policy, answers 409 run.terminal naming compensate: "always" and how to choose another', async ({
    expect,
  }) => {
    const run = await runSaga(failingSaga(), compensated);
    expect(run.status).toBe("failed");
    expect(run.compensation).toMatchObject({ status: "completed", trigger: "on_failure" });
    const runId = run.run_id;
    const refused = await api("POST", `/v1/runs/${runId}/redrive`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("run.terminal");
    const message: string = refused.json.error.message;
    expect(message).toContain("the run's compensation completed, so it cannot be redriven");
    expect(message).toContain(
      'compensate: "always" (the default: the workflow sets no policy) ran the undos when the run failed',
    );
    expect(message).toContain(`set the workflow's compensate to "on_cancel" or "never"`);
    expect(message).toContain("POST /v1/runs/{run_id}/compensate");
  });

  it("names the workflow's own policy when it sets one", async ({ expect }) => {
    const runId = (await runSaga(failingSaga("on_failure"), compensated)).run_id;
    const refused = await api("POST", `/v1/runs/${runId}/redrive`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.message).toContain(
      `compensate: "on_failure" (the workflow's policy) ran the undos when the run failed`,
    );
  });

  it("after undos run by hand, says so: the policy did not run them", async ({ expect }) => {
    const run = await runSaga(failingSaga("never"), (view) => view.status === "failed");
    expect(run.compensation).toMatchObject({ status: "none", trigger: null });
    const runId = run.run_id;
    expect((await api("POST", `/v1/runs/${runId}/compensate`)).status).toBe(200);
    await waitForRun(runId, (view) => view.compensation?.status === "completed");
    const refused = await api("POST", `/v1/runs/${runId}/redrive`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("run.terminal");
    expect(refused.json.error.message).toContain(
      "the run's compensation completed, so it cannot be redriven: POST /v1/runs/{run_id}/compensate ran the undos",
    );
    expect(refused.json.error.message).not.toContain("set the workflow's compensate");
  });
});
