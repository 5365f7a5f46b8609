// Definitions typed by hand in YAML, registered through real workerd.
import assert from "node:assert/strict";
import { test } from "node:test";
import { api, show, uid } from "./helpers.mjs";

test("a YAML bundle registers like its JSON", async () => {
  const id = uid("yaml");
  const yaml = `workflows:\n  - id: ${id}\n    nodes:\n      main:\n        task:\n          steps:\n            - ref: s\n              action: { kind: context, implementation: { updates: [ { path: v, expr: "1" } ] } }\n`;
  const res = await api("POST", "/v1/definitions", { rawBody: yaml, headers: { "content-type": "application/yaml" } });
  assert.equal(res.status, 201, show(res));
  assert.deepEqual(
    res.json.created.map((c) => c.id),
    [id],
  );
});
