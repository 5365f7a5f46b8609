import { sendEvents } from "../events/index.ts";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { checkBodyLimits } from "../lib/json-limits.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { Json } from "../schemas/common.ts";
import { EventInput, type DeadLetter } from "../schemas/events.ts";

/** The most characters of a poison message's body its dead letter keeps. */
export const MAX_DEAD_LETTER_BODY_CHARS = 65_536;

/**
 * The Cloudflare Queue consumer (wrangler.toml `queues.consumers`; docs/api.md,
 * "Events from a queue"): each message `{ name, data?, id? }` becomes an event
 * through the same path as `POST /v1/events` (an `id` deduplicates a
 * redelivered message). Each message is answered on its own:
 * - accepted: acked;
 * - not an event (not JSON of that shape, a bad name, past the body limits):
 *   sent to the dead-letter queue with its reason, then acked, never retried;
 * - the hubs unreachable (or the dead-letter queue, for a poison message):
 *   `retry()`, bounded by the consumer's `max_retries`, after which the
 *   platform moves it to the dead-letter queue as it came.
 */
export async function consumeEvents(batch: MessageBatch, env: Env): Promise<void> {
  await Promise.all(batch.messages.map((message) => consumeOne(message, env)));
}

async function consumeOne(message: Message, env: Env): Promise<void> {
  let event: EventInput;
  try {
    event = toEvent(message.body);
  } catch (thrown) {
    await deadLetter(message, env, ensureEngineError(thrown, "queue.invalid_message"));
    return;
  }
  try {
    await sendEvents(env, event);
    message.ack();
  } catch (thrown) {
    const error = ensureEngineError(thrown);
    if (error.code === "events.invalid_request") {
      await deadLetter(message, env, error);
      return;
    }
    log("queue message retried", message, error);
    message.retry();
  }
}

/**
 * A message body as one event: an object (a message sent as JSON or
 * structured data) or a string of JSON (a message sent as text), within the
 * limits of a request body. Throws the reason it is not one.
 */
export function toEvent(body: unknown): EventInput {
  let value = body;
  if (typeof body === "string") {
    try {
      value = JSON.parse(body) as unknown;
    } catch {
      throw EngineError.terminal("queue.invalid_message", "the message is text that is not JSON");
    }
  }
  checkBodyLimits(value);
  return parseOrThrow(EventInput, value, "events.invalid_request", "the event");
}

/** Sends a message that is not an event to the dead-letter queue with why, and acks it; retries it when that send fails. */
async function deadLetter(message: Message, env: Env, reason: EngineError): Promise<void> {
  const letter: DeadLetter = {
    reason: { code: reason.code, message: reason.message },
    body: toJsonBody(message.body),
    message_id: message.id,
  };
  try {
    if (env.EVENTS_DLQ === undefined) {
      throw new EngineError("queue.no_dead_letter_queue", "the EVENTS_DLQ binding is not configured");
    }
    await env.EVENTS_DLQ.send(letter, { contentType: "json" });
    log("queue message dead-lettered", message, reason);
    message.ack();
  } catch (thrown) {
    log("queue message could not be dead-lettered", message, ensureEngineError(thrown));
    message.retry();
  }
}

/**
 * The body as the dead letter carries it: JSON data as it is; anything else
 * (bytes, a value past the body limits or longer than
 * {@link MAX_DEAD_LETTER_BODY_CHARS} as JSON) as its text, cut there. A
 * queue message holds at most 128 KB, the letter's included.
 */
function toJsonBody(body: unknown): Json {
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch {
    text = undefined;
  }
  if (text === undefined) {
    return String(body).slice(0, MAX_DEAD_LETTER_BODY_CHARS);
  }
  try {
    checkBodyLimits(body);
  } catch {
    return text.slice(0, MAX_DEAD_LETTER_BODY_CHARS);
  }
  return text.length > MAX_DEAD_LETTER_BODY_CHARS
    ? text.slice(0, MAX_DEAD_LETTER_BODY_CHARS)
    : (JSON.parse(text) as Json);
}

function log(msg: string, message: Message, error: EngineError): void {
  console.error(
    JSON.stringify({ msg, message_id: message.id, attempts: message.attempts, code: error.code, error: error.message }),
  );
}
