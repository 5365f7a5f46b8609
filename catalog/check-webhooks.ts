import { isComputedSource } from "../lib/expr/mapping.ts";
import { MAX_EVENT_NAME_CHARS } from "../schemas/events.ts";
import type { Webhook } from "../schemas/webhooks.ts";
import { CEL_SCOPES, checkSecret, checkSourceLeaves, type Report } from "./checks.ts";

/**
 * What registration checks in a webhook beyond its schema (docs/definitions.md,
 * "Webhooks"): its secret is a `$env:` reference, its tolerance applies to its
 * scheme, and its event fields are sources that parse, over `headers` and `body`.
 */
export function checkWebhook(webhook: Webhook, path: string, report: Report): void {
  checkSecret(webhook.verify.secret, `${path}.verify.secret`, report);
  checkTolerance(webhook, `${path}.verify.tolerance_ms`, report);
  const { name, id, data } = webhook.event;
  if (!isComputedSource(name) && (typeof name !== "string" || name === "" || name.length > MAX_EVENT_NAME_CHARS)) {
    report(
      `${path}.event.name`,
      `must be an event name (1 to ${MAX_EVENT_NAME_CHARS} characters) or a source that yields one`,
      "definition.invalid_event_name",
    );
  }
  for (const [field, source] of [
    ["name", name],
    ["id", id],
    ["data", data],
  ] as const) {
    checkSourceLeaves(source, `${path}.event.${field}`, report, CEL_SCOPES.webhook);
  }
}

/** GitHub signs no timestamp, so a tolerance would promise a check that never happens. */
function checkTolerance(webhook: Webhook, path: string, report: Report): void {
  if (webhook.verify.scheme === "github" && webhook.verify.tolerance_ms !== undefined) {
    report(path, "github deliveries carry no signed timestamp: leave tolerance_ms out", "definition.invalid_tolerance");
  }
}
