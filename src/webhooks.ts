import { resolveSecrets } from "../executor/secrets.ts";
import { acceptEvents } from "../events/index.ts";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { unwrap } from "../lib/result.ts";
import { DEFINITION_ID_PATTERN } from "../schemas/common.ts";
import type { SendEventsResponse } from "../schemas/events.ts";
import { DEFAULT_WEBHOOK_TOLERANCE_MS, Webhook } from "../schemas/webhooks.ts";
import { SCHEMES, toWebhookEvent, type SignedDelivery } from "../webhooks/index.ts";
import { catalog } from "./service.ts";

/** The codes of a delivery refused for its signature: 401, logged, nothing stored. */
const REFUSED_CODES: ReadonlySet<string> = new Set([
  "webhook.missing_signature",
  "webhook.invalid_signature",
  "webhook.stale",
]);

/**
 * `POST /v1/hooks/{id}` (docs/api.md): the latest version of the webhook,
 * its secret resolved now, the delivery's signature checked before its body
 * is parsed; then the event it becomes, accepted as `POST /v1/events` accepts
 * one (a delivery id seen before is a duplicate, and starts nothing again).
 * A refused delivery leaves one log line (the webhook, the code, the reason:
 * never a header, the body or the secret).
 *
 * @throws EngineError `webhook.not_found` (404), a refusal (401, {@link REFUSED_CODES}),
 *   `webhook.misconfigured` (500), `webhook.invalid_body` / `webhook.invalid_event` (400).
 */
export async function receiveWebhook(
  env: Env,
  id: string,
  delivery: SignedDelivery,
  now = Date.now(),
): Promise<SendEventsResponse> {
  const webhook = await loadWebhook(env, id);
  const scheme = SCHEMES[webhook.verify.scheme];
  try {
    await scheme.verify(delivery, {
      secret: webhookSecret(env, webhook),
      toleranceMs: webhook.verify.tolerance_ms ?? DEFAULT_WEBHOOK_TOLERANCE_MS,
      now,
    });
  } catch (thrown) {
    const error = ensureEngineError(thrown);
    if (REFUSED_CODES.has(error.code)) {
      console.warn(
        JSON.stringify({ msg: "webhook delivery refused", webhook: id, code: error.code, reason: error.message }),
      );
    }
    throw error;
  }
  return acceptEvents(env, [toWebhookEvent(webhook, delivery)]);
}

/** The latest version of a webhook, or `webhook.not_found`. */
async function loadWebhook(env: Env, id: string): Promise<Webhook> {
  if (!DEFINITION_ID_PATTERN.test(id)) {
    throw EngineError.terminal("webhook.not_found", `no webhook "${id.slice(0, 64)}"`);
  }
  try {
    const record = unwrap(await catalog(env).get("webhooks", id));
    return Webhook.parse(record.definition);
  } catch (thrown) {
    const error = ensureEngineError(thrown);
    throw error.code === "definition.not_found"
      ? EngineError.terminal("webhook.not_found", `no webhook "${id}"`)
      : error;
  }
}

/** The webhook's secret from the Worker's secrets; a name the deployment does not provide is its misconfiguration. */
function webhookSecret(env: Env, webhook: Webhook): string {
  try {
    return resolveSecrets(webhook.verify.secret, env);
  } catch (thrown) {
    throw new EngineError("webhook.misconfigured", `webhook "${webhook.id}": ${ensureEngineError(thrown).message}`);
  }
}
