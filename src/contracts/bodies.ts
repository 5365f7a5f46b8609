/**
 * The bodies of the HTTP API, by their OpenAPI component names, with a line
 * of description each: what src/contracts/routes.ts refers to by name.
 */
import { z } from "zod";
import {
  DefinitionList,
  DefinitionRecord,
  DefinitionVersions,
  ErrorBody,
  GateAnswerBody,
  GateLinkAnswer,
  GateLinkBody,
  GateView,
  McpToolList,
  NodeDetail,
  OpenGateList,
  RegisterResponse,
  RunList,
  EraseBody,
  RunView,
  StartRunBody,
  StartRunResponse,
} from "../../schemas/api.ts";
import { CreatedToken, CreateTokenBody, TokenList, Whoami } from "../../schemas/auth.ts";
import { DefinitionBundle } from "../../schemas/definitions.ts";
import { EventTriggers, SendEventsBody, SendEventsResponse } from "../../schemas/events.ts";
import { JournalEntry, JournalResponse, Jwks } from "../../schemas/journal.ts";
import { PlanRequest, ApproveBody, StartPlanResponse } from "../../schemas/plans.ts";
import { DeletedRun } from "../../schemas/retention.ts";
import { LimitStatus } from "../../schemas/limits.ts";
import { McpMessage } from "../../schemas/mcp.ts";
import { BackfillAnswer, BackfillBody, ScheduleStatus, SlotRecord } from "../../schemas/schedules.ts";

/** Request bodies, by their OpenAPI component name (converted as input: what a client sends). */
export const REQUEST_SCHEMAS = {
  DefinitionBundle,
  StartRunBody,
  GateAnswerBody,
  GateLinkBody,
  /** Only `cancel` reads a body: an optional reason, recorded on the run. */
  CancelBody: z.object({ reason: z.string().optional() }),
  EraseBody,
  PlanRequest,
  ApproveBody,
  SendEventsBody,
  BackfillBody,
  /** A webhook delivery: whatever JSON its sender signed. */
  WebhookDelivery: z.unknown(),
  CreateTokenBody,
  McpMessage,
} as const satisfies Record<string, z.ZodType>;

/** Response bodies, by their OpenAPI component name (converted as output: what the server sends). */
export const RESPONSE_SCHEMAS = {
  Health: z.strictObject({ ok: z.literal(true) }),
  ErrorBody,
  RegisterResponse,
  DefinitionRecord,
  DefinitionList,
  DefinitionVersions,
  StartRunResponse,
  StartPlanResponse,
  RunView,
  DeletedRun,
  /** `POST /v1/runs/{id}/erase`: the run erased, or a deleted run whose archived journal was. */
  ErasedRun: z.union([RunView, DeletedRun]),
  RunList,
  NodeDetail,
  McpToolList,
  GateView,
  GateLinkAnswer,
  GateList: z.strictObject({ gates: z.array(GateView) }),
  OpenGateList,
  JournalEntry,
  JournalResponse,
  Jwks,
  SendEventsResponse,
  ScheduleStatus,
  SlotRecord,
  BackfillAnswer,
  LimitStatus,
  EventTriggers,
  CreatedToken,
  TokenList,
  RevokedToken: z.strictObject({ token_id: z.string(), revoked: z.literal(true) }),
  Whoami,
  /** The generated contracts themselves: a JSON Schema and an OpenAPI document. */
  JsonDocument: z.record(z.string(), z.unknown()),
} as const satisfies Record<string, z.ZodType>;

export type RequestSchemaName = keyof typeof REQUEST_SCHEMAS;
export type ResponseSchemaName = keyof typeof RESPONSE_SCHEMAS;

/** What each body is, one line each (the OpenAPI components' and the client types' descriptions). */
export const SCHEMA_DESCRIPTIONS: Record<RequestSchemaName | ResponseSchemaName, string> = {
  DefinitionBundle: "Definitions to register, by kind (docs/definitions.md).",
  StartRunBody: "How to start a run: its input, a pinned version, an idempotency key, a mode.",
  GateAnswerBody: "The answer to a gate: a response matching its input_schema, and who responded.",
  CancelBody: "An optional reason for a cancel, recorded on the run.",
  EraseBody: "Why the run is erased (required, at most 1,000 characters), recorded in its journal's erased entry.",
  PlanRequest:
    "An agent plan in either notation, its tools allowlist, input, mode, pre-approved steps (docs/plans.md).",
  ApproveBody: "Optional: approved_steps answers every matching open approval gate (step-02 matches step-02-*).",
  SendEventsBody: "One event { name, data?, id? }, or { events: [...] } with up to 100 of them.",
  WebhookDelivery: "Any JSON the sender signed: its raw bytes are verified before they are parsed.",
  SendEventsResponse:
    "Each event sent, in order: its id (the one given, or a generated evt_…), and whether it was a duplicate.",
  EventTriggers:
    "What an event's triggers did: matched (false until its triggers are read), and each start: pending, started with its run_id, or failed with the error.",
  StartPlanResponse: "A started plan run (or a preview: run_id null), with the graph the plan compiled to.",
  Health: "The Worker is up.",
  ErrorBody: "The body of every error: a dotted code, a message, and the problems with their paths.",
  RegisterResponse: "What a registration created or reused (existing: true), with versions.",
  DefinitionRecord: "A stored definition: its kind, id, version, and content (keys sorted).",
  DefinitionList: "The latest version of each definition of a kind, newest first, and the next page's cursor.",
  DefinitionVersions: "Every version of one definition, highest first, and the next page's cursor.",
  StartRunResponse: 'A started run (or, for a preview, run_id null, status "preview" and the plan).',
  DeletedRun: "A run deleted: when, why, the status it ended with, and whether its journal was archived.",
  ErasedRun:
    "The run erased (a run view with erased), or a deleted run whose archived journal was erased (with erased).",
  RunView: "A run: status, input, output, error, nodes, gates, usage, parent and children.",
  RunList: "A page of runs from the run index, newest first, and the cursor of the next page (null at the end).",
  McpToolList:
    "An MCP server's tools now, each with the pin an mcp action checks and whether allowed_tools lets it through.",
  NodeDetail: "One node of a run in full: each invocation with its dispatches' step records.",
  GateLinkBody: "An approval link's approver (an email, or a name) and how long it lasts.",
  GateLinkAnswer: "An approval link: its URL (the secret is in it, shown once), its id and when it expires.",
  GateView: "A human gate: an input or an approval, with its status and answer.",
  GateList: "Every gate of a run.",
  OpenGateList: "Open gates across runs, newest run first, each with its run, and the cursor of the next page.",
  JournalEntry: "One signed journal entry (docs/journal.md).",
  JournalResponse: "A run's signed journal, in seq order.",
  Jwks: "The journal's public keys as a JWKS (current and retired).",
  BackfillBody:
    "A range of slots to start (from and to inclusive, at most 1,000 slots), and the overlap policy for them.",
  ScheduleStatus: "A schedule: whether it is paused, its next 5 slots, and what became of its recent slots.",
  SlotRecord:
    "One slot of a schedule: its time, its run (null when none started) and the run's status, or skipped/buffered/start_failed with a reason.",
  BackfillAnswer: "How many slots a backfill queued, and the first and last of them.",
  LimitStatus:
    "One key of a limit: slots in use, holders waiting, the tokens (else rate) window's use and when it next frees room, the rate window too when it has both, and until when a Retry-After pauses it.",
  CreateTokenBody:
    "A token to make: its name, roles (reader, runner, approver, author, admin), the workflows it is limited to (id patterns, * for any characters), and when it expires.",
  CreatedToken: "The token made, with its secret: shown this once, stored only as a keyed hash.",
  TokenList: "Every stored token, newest first: never a secret nor its hash.",
  RevokedToken: "The token revoked: refused everywhere within 10 seconds.",
  Whoami:
    "The caller: a token (kind token: token_id, name) or a Cloudflare Access identity (kind access: email, groups), its roles, the workflows it is limited to (null: every workflow) and the created_by its runs record.",
  JsonDocument: "A JSON document: the generated JSON Schema or OpenAPI document.",
  McpMessage: "A JSON-RPC 2.0 message of the Model Context Protocol, or a batch of them (docs/mcp.md).",
};
