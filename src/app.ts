import { Hono, type Context } from "hono";
import { RUN_CONTROLS } from "../coordinator/controls.ts";
import { EngineError } from "../lib/errors.ts";
import { checkBodyLimits, MAX_BODY_BYTES } from "../lib/json-limits.ts";
import { parseYamlBody } from "../lib/yaml-body.ts";
import { DEFINITION_KINDS } from "../schemas/index.ts";
import { bearerAuth } from "./auth.ts";
import { onError } from "./errors.ts";
import { streamRunEvents } from "./events.ts";
import { listRuns } from "./run-list.ts";
import * as service from "./service.ts";

type App = { Bindings: Env; Variables: { principal: string } };

/**
 * The kinds `GET /v1/{kind}` lists, as a route pattern (`mcp_servers` also as
 * `mcp-servers`). A group: Hono splices the pattern into the route's regex as
 * it is, where a bare `a|b` would split the whole path.
 */
const LISTED_KINDS = `(?:${[...DEFINITION_KINDS, "mcp-servers"].join("|")})`;

/** The HTTP API (docs/api.md). Routes parse their input, call a service operation, and answer. */
export function createApp(): Hono<App> {
  const app = new Hono<App>();
  app.onError(onError);
  app.notFound((c) =>
    onError(EngineError.terminal("route.not_found", `no route ${c.req.method} ${new URL(c.req.url).pathname}`), c),
  );

  app.get("/healthz", (c) => c.json({ ok: true }));
  // Public keys are public: anyone verifying a journal offline needs them.
  app.get("/v1/journal-keys", async (c) => c.json(await service.journalKeys(c.env)));

  app.use("/v1/*", bearerAuth());
  app.post("/v1/definitions", async (c) => c.json(await service.registerDefinitions(c.env, await readJson(c)), 201));
  app.post("/v1/workflows/:id/runs", async (c) => {
    const { created, run } = await service.startRun(
      c.env,
      c.req.param("id"),
      await readJson(c, {}),
      c.get("principal"),
    );
    return c.json(run, created ? 201 : 200);
  });
  app.get("/v1/runs", async (c) => c.json(await listRuns(c.env.RUN_INDEX, c.req.query())));
  app.get("/v1/runs/:runId", async (c) => c.json(await service.getRun(c.env, c.req.param("runId"))));
  app.get("/v1/runs/:runId/nodes/:node", async (c) =>
    c.json(await service.getNode(c.env, c.req.param("runId"), c.req.param("node"))),
  );
  app.get("/v1/runs/:runId/journal", async (c) => c.json(await service.getJournal(c.env, c.req.param("runId"))));
  // One route per row of the run-control table; a body is optional, and only a cancel reads its `reason`.
  for (const control of RUN_CONTROLS) {
    app.post(`/v1/runs/:runId/${control}`, async (c) => {
      const body = await readJson(c, {});
      const reason =
        typeof body === "object" && body !== null && "reason" in body && typeof body.reason === "string"
          ? body.reason
          : undefined;
      return c.json(await service.controlRun(c.env, c.req.param("runId"), control, reason));
    });
  }
  app.get("/v1/runs/:runId/events", (c) => streamRunEvents(c, c.req.param("runId")));
  app.get("/v1/runs/:runId/gates", async (c) => c.json(await service.listGates(c.env, c.req.param("runId"))));
  app.post("/v1/runs/:runId/gates/:gateId", async (c) =>
    c.json(await service.answerGate(c.env, c.req.param("runId"), c.req.param("gateId"), await readJson(c))),
  );
  definitionRoutes(app);
  return app;
}

/** Definitions: the listings (`GET /v1/{kind}`, `…/{id}/versions`) and one definition, latest or pinned. */
function definitionRoutes(app: Hono<App>): void {
  // Kinds spelled out, so these never shadow another `/v1/<name>` route (`/v1/runs`) whatever the order.
  app.get(`/v1/:kind{${LISTED_KINDS}}`, async (c) =>
    c.json(await service.listDefinitions(c.env, c.req.param("kind"), c.req.query())),
  );
  app.get(`/v1/:kind{${LISTED_KINDS}}/:id/versions`, async (c) =>
    c.json(await service.listVersions(c.env, c.req.param("kind"), c.req.param("id"), c.req.query())),
  );
  app.get("/v1/:kind/:id", async (c) =>
    c.json(await service.getDefinition(c.env, c.req.param("kind"), c.req.param("id"))),
  );
  app.get("/v1/:kind/:id/versions/:version", async (c) => {
    const version = Number(c.req.param("version"));
    if (!Number.isInteger(version) || version < 1) {
      throw EngineError.terminal("definition.not_found", `"${c.req.param("version")}" is not a version number`);
    }
    return c.json(await service.getDefinition(c.env, c.req.param("kind"), c.req.param("id"), version));
  });
}

/**
 * The request body as JSON (or YAML, by its content type), bounded to
 * {@link MAX_BODY_BYTES} and checked against the ingress limits
 * (`checkBodyLimits`: depth, well-formed text, reserved keys) before any route
 * sees it. An empty body is `empty` when given (routes whose body is
 * optional), else a 400.
 */
async function readJson(c: Context<App>, empty?: unknown): Promise<unknown> {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) {
    throw EngineError.terminal("request.too_large", `the body is larger than ${MAX_BODY_BYTES} bytes`);
  }
  // Read as bytes whatever the content type says, then decoded as UTF-8 (invalid sequences become U+FFFD).
  const bytes = await c.req.arrayBuffer();
  if (bytes.byteLength > MAX_BODY_BYTES) {
    throw EngineError.terminal("request.too_large", `the body is larger than ${MAX_BODY_BYTES} bytes`);
  }
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") {
    if (empty !== undefined) {
      return empty;
    }
    throw EngineError.terminal("request.invalid_json", "the body is empty; send a JSON object");
  }
  const body = isYaml(c.req.header("content-type")) ? parseYamlBody(text) : parseJson(text);
  checkBodyLimits(body);
  return body;
}

/** `JSON.parse` (iterative in V8: any depth parses; the limits are checked on the result). */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw EngineError.terminal(
      "request.invalid_json",
      `the body is not JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** YAML is accepted where people type definitions by hand: `Content-Type: application/yaml` (or `text/yaml`). */
function isYaml(contentType: string | undefined): boolean {
  return /^(application|text)\/(x-)?yaml\b/i.test(contentType ?? "");
}
