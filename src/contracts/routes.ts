import type { Role } from "../../schemas/auth.ts";
import {
  REQUEST_SCHEMAS,
  RESPONSE_SCHEMAS,
  SCHEMA_DESCRIPTIONS,
  type RequestSchemaName,
  type ResponseSchemaName,
} from "./bodies.ts";

export { REQUEST_SCHEMAS, RESPONSE_SCHEMAS, SCHEMA_DESCRIPTIONS, type RequestSchemaName, type ResponseSchemaName };

/**
 * The HTTP API as data: one entry per route of src/app.ts, from which the
 * OpenAPI document is built (src/contracts/openapi.ts, `npm run schemas`).
 * A route added to the app is one entry here (and its schemas below when they
 * are new); test/workers/openapi-routes.test.ts names any route of the app
 * that has no entry, and any entry that has no route.
 */

/** A query parameter: its JSON Schema type and what it does. */
export interface QueryParam {
  type: "string" | "integer";
  description: string;
}

/**
 * How a token limited to workflows (docs/security.md, "Roles") reaches a route:
 * - `run`: the route names a run; a run of a workflow outside the grant is 404 `run.not_found`;
 * - `workflow`: it starts a run of the workflow it names; outside the grant, 404 `workflow.not_found`;
 * - `definition`: it names a definition; a workflow outside the grant is 404 `definition.not_found`
 *   (other kinds are shared by every workflow);
 * - `listing`: it lists runs, gates or definitions; those of workflows outside the grant are left out
 *   (a blob that only runs of workflows outside the grant hold is 404 `blob.not_found`);
 * - `any`: it touches no workflow's runs;
 * - `every`: it acts across workflows (events, plans, registrations, schedules, tokens): only a token
 *   of every workflow may call it, any other gets 403 `auth.forbidden`.
 */
export const GRANTS = ["run", "workflow", "definition", "listing", "any", "every"] as const;
export type Grant = (typeof GRANTS)[number];

/**
 * The role a route needs: one of the roles (admin holds every role), or
 * `any`: every authenticated principal, whatever its roles.
 */
export type RouteRole = Role | "any";

/** Who may call a route: nobody needs a token (`public`), or a bearer token (or an Access identity) with `role`. */
export type RouteAccess = { auth: "public" } | { auth: "bearer"; role: RouteRole; grant: Grant };

export type RouteSpec = RouteAccess & {
  method: "get" | "post" | "delete";
  /** OpenAPI form: `/v1/runs/{run_id}` (each `{param}` described in {@link PATH_PARAMS}). */
  path: string;
  /** Named as the Workers RPC method where there is one. */
  operationId: string;
  summary: string;
  /** The heading of docs/api.md that documents the route. */
  docs: string;
  tag: "meta" | "definitions" | "runs" | "gates" | "journal" | "events" | "schedules" | "limits" | "tokens" | "mcp";
  query?: Record<string, QueryParam>;
  /** Request headers the route reads. */
  headers?: Record<string, QueryParam>;
  /** `required: false`: an empty body is `{}`. `yaml`: also accepted as application/yaml. */
  body?: { schema: RequestSchemaName; required: boolean; yaml?: boolean };
  /**
   * Success statuses; `events` is a Server-Sent Events stream of journal
   * entries, `mcp` MCP's answer (JSON-RPC as JSON, or as a Server-Sent Events
   * stream), `empty` no body.
   */
  responses: Partial<
    Record<200 | 201 | 202, { description: string; schema: ResponseSchemaName | "events" | "mcp" | "empty" | "blob" }>
  >;
  /** Error statuses beyond those every route of its kind has (401 with a token, 400/413 with a body). */
  errors?: (400 | 401 | 403 | 404 | 409 | 410 | 500 | 502 | 503)[];
};

/**
 * Routes of the app that are not API and so not in the OpenAPI document: the
 * web console's pages (docs/api.md, "The web console": `GET /`, `/runs/{run_id}`, `/workflows/{id}`),
 * an approval link's HTML page and form (docs/api.md, "Approval links"), and
 * the methods of `/v1/mcp` that only say 405,
 * as `METHOD /path` (parameters in either `:name` or `{name}` form).
 */
export const NOT_API_ROUTES: string[] = [
  "GET /",
  "GET /runs/{run_id}",
  "GET /workflows/{id}",
  "GET /v1/links/{run_id}/{link_id}/{secret}",
  "POST /v1/links/{run_id}/{link_id}/{secret}",
  // The MCP server's transport offers no stream to GET and no session to DELETE: both answer 405 (docs/mcp.md).
  "GET /v1/mcp",
  "DELETE /v1/mcp",
];

/** Every path parameter of the API, described once. */
export const PATH_PARAMS: Record<string, string> = {
  kind: "A definition kind as in the bundle, `_` written `-`: workflows, tasks, actions, prompts, models, mcp-servers, schedules, webhooks, limits.",
  id: "A definition id (`^[a-z][a-z0-9_-]{0,62}$`).",
  version: "A version number, 1 or more.",
  run_id: "A run id, as returned when the run started.",
  node: "A node id of the run's workflow.",
  gate_id: "A gate id, as listed by GET /v1/runs/{run_id}/gates.",
  event_id: "An event id, as POST /v1/events answered it.",
  token_id: "A token id, as POST /v1/tokens answered it (tok_…).",
  digest: "A blob's digest as its references name it: `sha256:` and 64 lowercase hex digits.",
};

/** The run controls (coordinator/controls.ts): `POST /v1/runs/{run_id}/<control>`, each answering the run view. */
const CONTROL_ROUTES: RouteSpec[] = [
  ["cancel", "Cancel the run: cascades to its child runs and closes its gates."],
  ["pause", "Stop dispatching; what is in flight finishes."],
  ["resume", "Resume dispatching a paused run."],
  ["redrive", "Re-run a failed run from its failed nodes, keeping what completed (or resume its failed compensation)."],
  ["compensate", "Run the undos of a failed or cancelled run that has not compensated, latest first."],
  ["approve", 'Start a run created with mode "approval"; approved_steps also answers matching approval gates.'],
].map(([control = "", summary = ""]) => ({
  method: "post",
  path: `/v1/runs/{run_id}/${control}`,
  operationId: `${control}Run`,
  summary,
  auth: "bearer",
  // Approving a run is an approval; every other control steers a run.
  role: control === "approve" ? "approver" : "runner",
  grant: "run",
  docs:
    control === "pause" || control === "resume"
      ? "POST /v1/runs/{run_id}/pause · /resume"
      : `POST /v1/runs/{run_id}/${control}`,
  tag: "runs",
  ...(control === "cancel" ? { body: { schema: "CancelBody", required: false } } : {}),
  ...(control === "approve" ? { body: { schema: "ApproveBody", required: false } } : {}),
  responses: { 200: { description: "The run after the control.", schema: "RunView" } },
  errors: [404, 409, 410],
}));

/** A schedule's status and controls (schedules/route.ts), each named as its RPC method. */
const SCHEDULE_ROUTES: RouteSpec[] = [
  {
    method: "get",
    path: "/v1/schedules/{id}/status",
    operationId: "scheduleStatus",
    summary: "A schedule's state: paused or not, its next 5 slots, and what became of its recent slots.",
    auth: "bearer",
    role: "reader",
    grant: "every",
    docs: "GET /v1/schedules/{id}/status",
    tag: "schedules",
    responses: { 200: { description: "The schedule's status.", schema: "ScheduleStatus" } },
    errors: [404],
  },
  ...(
    [
      ["pause", "pauseSchedule", "Stop starting the schedule's slots until it is resumed."],
      ["resume", "resumeSchedule", "Start the schedule's slots again, from now on."],
    ] as const
  ).map(([control, operationId, summary]): RouteSpec => ({
    method: "post",
    path: `/v1/schedules/{id}/${control}`,
    operationId,
    summary,
    auth: "bearer",
    // Pausing or resuming changes what the schedule does from now on, as registering it does.
    role: "author",
    grant: "every",
    docs: "POST /v1/schedules/{id}/pause · /resume",
    tag: "schedules",
    responses: { 200: { description: "The schedule's status after the control.", schema: "ScheduleStatus" } },
    errors: [404],
  })),
  {
    method: "post",
    path: "/v1/schedules/{id}/trigger",
    operationId: "triggerSchedule",
    summary: "Start one run of the schedule now, whatever its overlap policy.",
    auth: "bearer",
    role: "runner",
    grant: "every",
    docs: "POST /v1/schedules/{id}/trigger",
    tag: "schedules",
    responses: { 200: { description: "The slot now, with its run.", schema: "SlotRecord" } },
    errors: [404],
  },
  {
    method: "post",
    path: "/v1/schedules/{id}/backfill",
    operationId: "backfillSchedule",
    summary: "Start one run per slot from `from` to `to` (at most 1,000 slots), each by the overlap policy.",
    auth: "bearer",
    role: "runner",
    grant: "every",
    docs: "POST /v1/schedules/{id}/backfill",
    tag: "schedules",
    body: { schema: "BackfillBody", required: true },
    responses: { 202: { description: "The slots queued.", schema: "BackfillAnswer" } },
    errors: [404],
  },
];

/** A limit object's state (limits/keeper.ts). */
const LIMIT_ROUTES: RouteSpec[] = [
  {
    method: "get",
    path: "/v1/limits/{id}/status",
    operationId: "limitStatus",
    summary: "One key's slots in use, runs and calls waiting, and window of a limit (its Retry-After pause too).",
    auth: "bearer",
    role: "reader",
    // Counts only, no run or workflow named: a token limited to workflows may watch the limits its runs wait for.
    grant: "any",
    docs: "GET /v1/limits/{id}/status",
    tag: "limits",
    query: {
      key: {
        type: "string",
        description:
          'The key\'s value (at most 256 characters); absent or empty: "", the key of a limit named without `key`.',
      },
    },
    responses: { 200: { description: "The limit object's state for that key.", schema: "LimitStatus" } },
    errors: [400, 404],
  },
];

/** Tokens as data (docs/api.md, "Tokens"): admin only; and who the caller is, for everyone. */
const TOKEN_ROUTES: RouteSpec[] = [
  {
    method: "get",
    path: "/v1/whoami",
    operationId: "whoami",
    summary: "Who the caller is: its token or Access identity, its roles and the workflows it is limited to.",
    auth: "bearer",
    role: "any",
    grant: "any",
    docs: "GET /v1/whoami",
    tag: "tokens",
    responses: { 200: { description: "The caller's principal.", schema: "Whoami" } },
  },
  {
    method: "post",
    path: "/v1/tokens",
    operationId: "createToken",
    summary: "Make a token with roles, optionally limited to workflows and expiring; its secret is shown once.",
    auth: "bearer",
    role: "admin",
    grant: "every",
    docs: "POST /v1/tokens",
    tag: "tokens",
    body: { schema: "CreateTokenBody", required: true },
    responses: { 201: { description: "The token, with its secret.", schema: "CreatedToken" } },
  },
  {
    method: "get",
    path: "/v1/tokens",
    operationId: "listTokens",
    summary: "Every stored token (never a secret).",
    auth: "bearer",
    role: "admin",
    grant: "every",
    docs: "GET /v1/tokens",
    tag: "tokens",
    responses: { 200: { description: "The stored tokens.", schema: "TokenList" } },
  },
  {
    method: "delete",
    path: "/v1/tokens/{token_id}",
    operationId: "revokeToken",
    summary: "Revoke a token: refused everywhere within 10 seconds.",
    auth: "bearer",
    role: "admin",
    grant: "every",
    docs: "DELETE /v1/tokens/{token_id}",
    tag: "tokens",
    responses: { 200: { description: "The token revoked.", schema: "RevokedToken" } },
    errors: [404],
  },
];

/** The query of the definition listings. */
const LISTING_QUERY: Record<string, QueryParam> = {
  limit: { type: "integer", description: "Items per page, 1 to 100 (default 50)." },
  cursor: { type: "string", description: "The next_cursor of the previous page." },
};

/** The headers each webhook scheme signs with (docs/api.md, "POST /v1/hooks/{id}"). */
const WEBHOOK_HEADERS: Record<string, QueryParam> = {
  "webhook-id": { type: "string", description: "standard-webhooks: the delivery's id (deduplicates)." },
  "webhook-timestamp": { type: "integer", description: "standard-webhooks: Unix seconds, signed." },
  "webhook-signature": { type: "string", description: "standard-webhooks: v1,<base64>, space-separated." },
  "X-Hub-Signature-256": { type: "string", description: "github: sha256=<hex> over the body." },
  "X-GitHub-Delivery": { type: "string", description: "github: the delivery's id (deduplicates)." },
  "Stripe-Signature": { type: "string", description: "stripe: t=<unix seconds>,v1=<hex> over <t>.<body>." },
  "X-Signature": { type: "string", description: "hmac-sha256: sha256=<hex> over the body (or <timestamp>.<body>)." },
  "X-Signature-Timestamp": { type: "integer", description: "hmac-sha256, optional: Unix seconds, signed." },
};

export const API_ROUTES: RouteSpec[] = [
  {
    method: "get",
    path: "/healthz",
    operationId: "health",
    summary: "Liveness.",
    auth: "public",
    docs: "GET /healthz",
    tag: "meta",
    responses: { 200: { description: "The Worker is up.", schema: "Health" } },
  },
  {
    method: "get",
    path: "/v1/journal-keys",
    operationId: "journalKeys",
    summary: "The JWKS of the journal's public keys (current and retired).",
    auth: "public",
    docs: "GET /v1/journal-keys",
    tag: "journal",
    responses: { 200: { description: "The JWKS.", schema: "Jwks" } },
  },
  {
    method: "get",
    path: "/v1/schemas/definitions.json",
    operationId: "definitionsSchema",
    summary: "The JSON Schema (draft 2020-12) of a definition bundle, for editors.",
    auth: "public",
    docs: "Machine-readable contracts",
    tag: "meta",
    responses: { 200: { description: "schemas/json/definitions.schema.json.", schema: "JsonDocument" } },
  },
  {
    method: "get",
    path: "/v1/openapi.json",
    operationId: "openApi",
    summary: "This document: the OpenAPI 3.1 description of the HTTP API.",
    auth: "public",
    docs: "Machine-readable contracts",
    tag: "meta",
    responses: { 200: { description: "schemas/json/openapi.json.", schema: "JsonDocument" } },
  },
  {
    method: "post",
    path: "/v1/definitions",
    operationId: "registerDefinitions",
    summary: "Register a bundle of definitions; identical content reuses its version.",
    auth: "bearer",
    role: "author",
    grant: "every",
    docs: "POST /v1/definitions",
    tag: "definitions",
    body: { schema: "DefinitionBundle", required: true, yaml: true },
    responses: { 201: { description: "What was created or reused, with versions.", schema: "RegisterResponse" } },
  },
  {
    method: "get",
    path: "/v1/{kind}",
    operationId: "listDefinitions",
    summary: "The latest version of each definition of a kind, newest first, paginated.",
    auth: "bearer",
    role: "reader",
    grant: "listing",
    docs: "GET /v1/{kind} · GET /v1/{kind}/{id}/versions",
    tag: "definitions",
    query: LISTING_QUERY,
    responses: { 200: { description: "A page of definitions.", schema: "DefinitionList" } },
    errors: [400, 404],
  },
  {
    method: "get",
    path: "/v1/{kind}/{id}/versions",
    operationId: "listVersions",
    summary: "Every version of one definition, highest first, paginated.",
    auth: "bearer",
    role: "reader",
    grant: "definition",
    docs: "GET /v1/{kind} · GET /v1/{kind}/{id}/versions",
    tag: "definitions",
    query: LISTING_QUERY,
    responses: { 200: { description: "A page of versions.", schema: "DefinitionVersions" } },
    errors: [400, 404],
  },
  {
    method: "get",
    path: "/v1/{kind}/{id}",
    operationId: "getDefinition",
    summary: "The latest version of a definition.",
    auth: "bearer",
    role: "reader",
    grant: "definition",
    docs: "GET /v1/{kind}/{id}",
    tag: "definitions",
    responses: { 200: { description: "The stored definition.", schema: "DefinitionRecord" } },
    errors: [404],
  },
  {
    method: "get",
    path: "/v1/{kind}/{id}/versions/{version}",
    operationId: "getDefinitionVersion",
    summary: "One version of a definition.",
    auth: "bearer",
    role: "reader",
    grant: "definition",
    docs: "GET /v1/{kind}/{id}",
    tag: "definitions",
    responses: { 200: { description: "The stored definition.", schema: "DefinitionRecord" } },
    errors: [404],
  },
  {
    method: "post",
    path: "/v1/workflows/{id}/runs",
    operationId: "startRun",
    summary: "Start a run (or preview one); the same idempotency key returns the same run.",
    auth: "bearer",
    role: "runner",
    grant: "workflow",
    docs: "POST /v1/workflows/{id}/runs",
    tag: "runs",
    headers: {
      Prefer: {
        type: "string",
        description:
          "`wait=N` (RFC 7240): answer once the run has ended, with its output and error, or after N seconds (at most 60), whichever is first; the answer says `Preference-Applied: wait=N`.",
      },
      traceparent: {
        type: "string",
        description:
          "W3C Trace Context: the run's exported spans join this trace, its run span a child of this span (docs/telemetry.md); an invalid value is ignored.",
      },
    },
    body: { schema: "StartRunBody", required: false },
    responses: {
      201: { description: "A new run.", schema: "StartRunResponse" },
      200: { description: "The run this idempotency key started, or a preview's plan.", schema: "StartRunResponse" },
    },
    errors: [404, 409],
  },
  {
    method: "post",
    path: "/v1/plans",
    operationId: "startPlan",
    summary: "Run (or preview) an agent plan in the dependency or placeholder notation.",
    auth: "bearer",
    role: "runner",
    grant: "every",
    docs: "POST /v1/plans",
    tag: "runs",
    headers: {
      Prefer: {
        type: "string",
        description:
          "`wait=N` (RFC 7240): answer once the run has ended, with its output and error, or after N seconds (at most 60), whichever is first; the answer says `Preference-Applied: wait=N`.",
      },
    },
    body: { schema: "PlanRequest", required: true },
    responses: {
      201: { description: "A new plan run.", schema: "StartPlanResponse" },
      200: { description: "The run this idempotency key started, or a preview's graph.", schema: "StartPlanResponse" },
    },
    errors: [404, 409],
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/signals",
    operationId: "signalRun",
    summary: "Send signals to one run: each is taken by a waiting event step it matches, or kept until one is.",
    auth: "bearer",
    role: "runner",
    grant: "run",
    docs: "POST /v1/runs/{run_id}/signals",
    tag: "events",
    body: { schema: "SendEventsBody", required: true },
    responses: {
      202: {
        description: "Accepted: each signal's id, and whether this run accepted that id before.",
        schema: "SendEventsResponse",
      },
    },
    errors: [404, 409],
  },
  {
    method: "post",
    path: "/v1/events",
    operationId: "sendEvents",
    summary: "Send events (one, or up to 100): each resumes the runs waiting for its name that it matches.",
    auth: "bearer",
    role: "runner",
    grant: "every",
    docs: "POST /v1/events",
    tag: "events",
    body: { schema: "SendEventsBody", required: true },
    responses: {
      202: {
        description: "Accepted: each event's id, and whether that id was accepted before.",
        schema: "SendEventsResponse",
      },
    },
    errors: [503],
  },
  {
    method: "post",
    path: "/v1/hooks/{id}",
    operationId: "receiveWebhook",
    summary: "A webhook delivery: verified by its signature (no token), then accepted as an event.",
    auth: "public",
    docs: "POST /v1/hooks/{id}",
    tag: "events",
    headers: WEBHOOK_HEADERS,
    body: { schema: "WebhookDelivery", required: true },
    responses: {
      202: {
        description: "Verified and accepted: the event's id, and whether that delivery was accepted before.",
        schema: "SendEventsResponse",
      },
    },
    errors: [401, 404, 500, 503],
  },
  {
    method: "get",
    path: "/v1/events/{event_id}/triggers",
    operationId: "eventTriggers",
    summary: "What an event's triggers started: one run per workflow whose trigger matched, or why it did not start.",
    auth: "bearer",
    role: "reader",
    grant: "every",
    docs: "GET /v1/events/{event_id}/triggers",
    tag: "events",
    query: { name: { type: "string", description: "The event's name (required)." } },
    responses: {
      200: { description: "Whether the event is matched yet, and each start.", schema: "EventTriggers" },
    },
    errors: [400, 404],
  },
  {
    method: "get",
    path: "/v1/mcp_servers/{id}/tools",
    operationId: "mcpServerTools",
    summary: "An MCP server's tools, each with the pin an mcp action would check.",
    auth: "bearer",
    role: "reader",
    grant: "any",
    docs: "GET /v1/mcp_servers/{id}/tools",
    tag: "definitions",
    responses: { 200: { description: "The tools the server lists now.", schema: "McpToolList" } },
    errors: [404],
  },
  {
    method: "get",
    path: "/v1/runs",
    operationId: "listRuns",
    summary: "Runs from the run index, newest first, filtered and paginated with an opaque cursor.",
    auth: "bearer",
    role: "reader",
    grant: "listing",
    docs: "GET /v1/runs",
    tag: "runs",
    query: {
      workflow: { type: "string", description: "A workflow id, or id@version." },
      status: { type: "string", description: "One or more run statuses, comma-separated." },
      parent: { type: "string", description: "Only the child runs of this run." },
      created_after: { type: "string", description: "ISO time: runs created after it." },
      created_before: { type: "string", description: "ISO time: runs created before it." },
      limit: { type: "integer", description: "Runs per page, 1 to 100 (default 50)." },
      cursor: { type: "string", description: "The next_cursor of the previous page." },
    },
    responses: { 200: { description: "A page of runs.", schema: "RunList" } },
    errors: [400],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}",
    operationId: "getRun",
    summary: "A run: status, input, output, error, nodes, gates, usage.",
    auth: "bearer",
    role: "reader",
    grant: "run",
    docs: "GET /v1/runs/{run_id}",
    tag: "runs",
    responses: { 200: { description: "The run view.", schema: "RunView" } },
    errors: [404, 410],
  },
  {
    method: "delete",
    path: "/v1/runs/{run_id}",
    operationId: "deleteRun",
    summary:
      "Delete a run that has ended, now: its object's storage (its journal archived first when its retention says so).",
    auth: "bearer",
    role: "admin",
    grant: "run",
    docs: "DELETE /v1/runs/{run_id}",
    tag: "runs",
    responses: { 200: { description: "The run, deleted (also when it already was).", schema: "DeletedRun" } },
    errors: [404, 409, 503],
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/erase",
    operationId: "eraseRun",
    summary:
      "Erase an ended run's data: its input, outputs, step results, answers and blobs; the journal keeps their digests and still verifies.",
    auth: "bearer",
    role: "admin",
    grant: "run",
    docs: "POST /v1/runs/{run_id}/erase",
    tag: "runs",
    body: { schema: "EraseBody", required: true },
    responses: {
      200: {
        description:
          "The run view, erased; of a deleted run whose journal was archived, the deleted run with its archive erased.",
        schema: "ErasedRun",
      },
    },
    errors: [404, 409, 410],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/nodes/{node}",
    operationId: "getNode",
    summary: "One node in full: its invocations and their steps.",
    auth: "bearer",
    role: "reader",
    grant: "run",
    docs: "GET /v1/runs/{run_id}/nodes/{node}",
    tag: "runs",
    responses: { 200: { description: "The node.", schema: "NodeDetail" } },
    errors: [404, 410],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/journal",
    operationId: "getJournal",
    summary: "The run's signed journal.",
    auth: "bearer",
    role: "reader",
    grant: "run",
    docs: "GET /v1/runs/{run_id}/journal",
    tag: "journal",
    responses: { 200: { description: "Every entry, in seq order.", schema: "JournalResponse" } },
    errors: [404, 410],
  },
  {
    method: "get",
    path: "/v1/blobs/{digest}",
    operationId: "getBlob",
    summary: "A blob's bytes (a large value of a run, stored once), to a token that may read a run holding it.",
    auth: "bearer",
    role: "reader",
    grant: "listing",
    docs: "GET /v1/blobs/{digest}",
    tag: "journal",
    responses: {
      200: {
        description: "The bytes, with their media type (a value's canonical JSON: application/json).",
        schema: "blob",
      },
    },
    errors: [400, 404, 502],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/events",
    operationId: "runEvents",
    summary: "The run's journal as Server-Sent Events, resumable; closes after the attestation.",
    auth: "bearer",
    role: "reader",
    grant: "run",
    docs: "GET /v1/runs/{run_id}/events",
    tag: "journal",
    query: { after: { type: "integer", description: "The last seq seen (as Last-Event-ID)." } },
    headers: { "Last-Event-ID": { type: "integer", description: "The last seq seen; the stream resumes after it." } },
    responses: {
      200: { description: "One event per entry: id = seq, event = kind, data = the entry.", schema: "events" },
    },
    errors: [400, 404, 410],
  },
  ...CONTROL_ROUTES,
  {
    method: "get",
    path: "/v1/runs/{run_id}/gates",
    operationId: "listGates",
    summary: "The run's human gates (inputs and approvals), with their status.",
    auth: "bearer",
    role: "reader",
    grant: "run",
    docs: "GET /v1/runs/{run_id}/gates",
    tag: "gates",
    responses: { 200: { description: "Every gate of the run.", schema: "GateList" } },
    errors: [404, 410],
  },
  {
    method: "get",
    path: "/v1/gates",
    operationId: "listOpenGates",
    summary: "Open gates across runs (inputs and approvals), newest run first, paginated with an opaque cursor.",
    auth: "bearer",
    role: "reader",
    grant: "listing",
    docs: "GET /v1/gates",
    tag: "gates",
    query: {
      status: { type: "string", description: "open (the default and only value)." },
      limit: { type: "integer", description: "Runs per page whose open gates are listed, 1 to 50 (default 20)." },
      cursor: { type: "string", description: "The next_cursor of the previous page." },
    },
    responses: { 200: { description: "A page of open gates.", schema: "OpenGateList" } },
    errors: [400],
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/gates/{gate_id}",
    operationId: "answerGate",
    summary: "Answer an open gate.",
    auth: "bearer",
    role: "approver",
    grant: "run",
    docs: "POST /v1/runs/{run_id}/gates/{gate_id}",
    tag: "gates",
    body: { schema: "GateAnswerBody", required: true },
    responses: { 200: { description: "The answered gate.", schema: "GateView" } },
    errors: [403, 404, 409],
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/gates/{gate_id}/links",
    operationId: "linkGate",
    summary: "Make an approval link of an open gate for one approver: a page that answers it once.",
    auth: "bearer",
    role: "approver",
    grant: "run",
    docs: "POST /v1/runs/{run_id}/gates/{gate_id}/links",
    tag: "gates",
    body: { schema: "GateLinkBody", required: true },
    responses: { 201: { description: "The link.", schema: "GateLinkAnswer" } },
    errors: [403, 404, 409],
  },
  ...SCHEDULE_ROUTES,
  ...LIMIT_ROUTES,
  ...TOKEN_ROUTES,
  {
    method: "post",
    path: "/v1/mcp",
    operationId: "mcp",
    summary:
      "The MCP server (Streamable HTTP, stateless): exposed workflows and the trellis_* tools; each tool checks the role of its API twin.",
    auth: "bearer",
    // Any caller may talk to the server; each tool needs what its route needs (docs/mcp.md, "Who sees which tool").
    role: "any",
    grant: "any",
    docs: "POST /v1/mcp",
    tag: "mcp",
    body: { schema: "McpMessage", required: true },
    responses: {
      200: { description: "The answer to the requests: JSON-RPC, as a Server-Sent Events stream.", schema: "mcp" },
      202: { description: "The body held only notifications or responses (an elicitation's answer).", schema: "empty" },
    },
    errors: [404, 409],
  },
];
