import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { buildValue, evaluateSource } from "../lib/expr/mapping.ts";
import { MAX_EVENT_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { checkBodyLimits, MAX_BODY_BYTES } from "../lib/json-limits.ts";
import type { Json } from "../schemas/common.ts";
import { EventName, MAX_EVENT_ID_CHARS, type HubEventInput } from "../schemas/events.ts";
import type { Webhook } from "../schemas/webhooks.ts";
import { SCHEMES, type SignedDelivery } from "./schemes.ts";

/**
 * A verified delivery as the event it becomes (docs/definitions.md,
 * "Webhooks"): the webhook's `event` fields evaluated over `{ headers, body }`,
 * the headers by their lower-case names and the body parsed as JSON (or its text).
 *
 * @throws EngineError `webhook.invalid_body` (a body that is not UTF-8),
 *   `webhook.invalid_event` (a name, id or data the mapping cannot make),
 *   both 400; the ingress limits' `request.*` codes.
 */
export function toWebhookEvent(webhook: Webhook, delivery: SignedDelivery): HubEventInput {
  const body = parseBody(delivery.body);
  const headers: Record<string, string> = {};
  delivery.headers.forEach((value, name) => {
    headers[name.toLowerCase()] = value;
  });
  const doc = { headers, body };
  // Expressions over a stranger's body: bounded like a hub's own call.
  return withWorkBudget(new WorkBudget(MAX_EVENT_WORK_UNITS, "webhook delivery"), () => ({
    name: eventName(webhook, doc),
    id: eventId(webhook, doc, SCHEMES[webhook.verify.scheme].deliveryId(delivery.headers, body)),
    data: eventData(webhook, doc),
    source: { kind: "webhook" as const, webhook: webhook.id },
  }));
}

/**
 * The body as JSON when it is JSON (`null` when empty, within the ingress
 * limits every API body has), else its text: a sender may sign plain text.
 */
function parseBody(bytes: Uint8Array): Json {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw EngineError.terminal("webhook.invalid_body", "the delivery's body is not UTF-8 text");
  }
  if (text.trim() === "") {
    return null;
  }
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    return text;
  }
  checkBodyLimits(body);
  return body as Json;
}

type Doc = { headers: Record<string, string>; body: Json };

function eventName(webhook: Webhook, doc: Doc): string {
  const value = evaluated("event.name", () => evaluateSource(webhook.event.name, doc));
  const parsed = EventName.safeParse(value);
  if (!parsed.success) {
    throw invalidEvent(`event.name yields ${describe(value)}, not an event name (1 to 256 characters)`);
  }
  return parsed.data;
}

/** The mapped id, else the scheme's delivery id: one of them must name the delivery, for deduplication. */
function eventId(webhook: Webhook, doc: Doc, deliveryId: string | undefined): string {
  const value =
    webhook.event.id === undefined ? deliveryId : evaluated("event.id", () => evaluateSource(webhook.event.id, doc));
  const id = typeof value === "number" && Number.isInteger(value) ? String(value) : value;
  if (typeof id !== "string" || id === "" || id.length > MAX_EVENT_ID_CHARS) {
    const from = webhook.event.id === undefined ? `the ${webhook.verify.scheme} delivery's own id` : "event.id";
    throw invalidEvent(`${from} is ${describe(value)}, not an id of 1 to ${MAX_EVENT_ID_CHARS} characters`);
  }
  return id;
}

function eventData(webhook: Webhook, doc: Doc): Json {
  const shape = webhook.event.data;
  if (shape === undefined) {
    return doc.body;
  }
  return evaluated("event.data", () => buildValue(shape, doc, "event.data", MAX_BODY_BYTES)) ?? null;
}

/** The value a source yields (undefined when it selects nothing); its failure as `webhook.invalid_event`. */
function evaluated(at: string, evaluate: () => { found: true; value: Json } | { found: false }): Json | undefined {
  try {
    const result = evaluate();
    return result.found ? result.value : undefined;
  } catch (thrown) {
    throw invalidEvent(`${at}: ${ensureEngineError(thrown).message}`);
  }
}

function describe(value: Json | undefined): string {
  if (value === undefined) {
    return "nothing";
  }
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

function invalidEvent(message: string): EngineError {
  return EngineError.terminal("webhook.invalid_event", message);
}
