import { it } from "vitest";
import { api, uniqueId, waitForRun } from "./helpers.ts";

it("runs a one-node greet workflow to completed with the expected output", async ({ expect }) => {
  const id = uniqueId("greet");
  const register = await api("POST", "/v1/definitions", {
    workflows: [
      {
        id,
        input_schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
        nodes: {
          hello: {
            task: {
              steps: [
                {
                  ref: "make",
                  action: {
                    kind: "context",
                    implementation: { updates: [{ path: "greeting", expr: "'Hello, ' + input.name" }] },
                  },
                  output_mapping: { "output.greeting": "$.greeting" },
                },
              ],
            },
            output_mapping: { "output.greeting": "$.greeting" },
          },
        },
      },
    ],
  });
  expect(register.status).toBe(201);
  const start = await api("POST", `/v1/workflows/${id}/runs`, { input: { name: "Ada" } });
  expect(start.status).toBe(201);
  const run = await waitForRun(start.json.run_id);
  expect(run.status).toBe("completed");
  expect(run.output).toEqual({ greeting: "Hello, Ada" });
  expect(run.nodes.hello).toMatchObject({ status: "completed", attempts: 1 });
});
