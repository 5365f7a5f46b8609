import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import type { ErrorBody } from "../schemas/api.ts";

/** Exact codes whose status is not implied by their suffix. */
const STATUS_BY_CODE: Record<string, ContentfulStatusCode> = {
  "auth.missing_token": 401,
  "auth.invalid_token": 401,
  "auth.token_expired": 401,
  // A role or a grant of workflows the token does not hold (docs/security.md, "Roles"), or not one of a gate's approvers.
  "auth.forbidden": 403,
  // Cloudflare Access (src/cloudflare-access.ts): an assertion that does not verify, a key set that cannot be fetched.
  "auth.invalid_access_token": 401,
  "auth.access_unavailable": 503,
  // A malformed ACCESS_ROLES is the operator's misconfiguration.
  "access.bad_config": 500,
  // Approval links (src/gate-links.ts): used once, then 409; past their expiry, 410.
  "link.used": 409,
  "link.expired": 410,
  "gate.too_many_links": 409,
  "request.too_large": 413,
  "request.invalid_json": 400,
  "request.invalid_yaml": 400,
  // The ingress limits on every body (lib/json-limits.ts).
  "request.too_deep": 400,
  "request.invalid_text": 400,
  "request.reserved_key": 400,
  "request.invalid_argument": 400,
  "run.terminal": 409,
  // Retention (docs/architecture.md, "Retention"): a deleted run is gone for good; only a run that ended can be deleted.
  "run.deleted": 410,
  "run.not_terminal": 409,
  "retention.archive_unavailable": 503,
  "retention.blobs_unavailable": 503,
  "run.signals_full": 409,
  "run.idempotency_conflict": 409,
  "run.conflict": 409,
  // Erasure (docs/security.md, "Erasure"): only an ended run (run.not_terminal, above); an erased run cannot run again.
  "run.erased": 409,
  "gate.answered": 409,
  // A bad signing key is the operator's misconfiguration, not the client's.
  "journal.bad_key": 500,
  "gate.expired": 409,
  "request.invalid_cursor": 400,
  // The run index (D1) cannot be read right now; the runs themselves are unaffected.
  "index.unavailable": 503,
  "action.not_implemented": 501,
  // External events (docs/api.md, "POST /v1/events").
  "events.too_many_names": 400,
  "events.unavailable": 503,
  // Webhook deliveries (docs/api.md, "POST /v1/hooks/{id}"): the signature is the credential.
  "webhook.missing_signature": 401,
  "webhook.invalid_signature": 401,
  "webhook.stale": 401,
  // Agent plans (docs/plans.md).
  "plan.args_invalid": 400,
  "plan.tool_not_allowed": 403,
  "plan.preapproval_disabled": 403,
  "plan.too_large": 413,
  // Blobs (docs/api.md, "GET /v1/blobs/{digest}"): bytes that do not hash to their digest are never served.
  "blob.corrupt": 502,
  "blob.too_large": 413,
  "blob.unavailable": 503,
};

/** The rest by their last segment: `*.not_found` is 404, `*.invalid*` is 400, … */
const STATUS_BY_SUFFIX: [RegExp, ContentfulStatusCode][] = [
  [/\.not_found$/, 404],
  [/\.(invalid|invalid_[a-z_]+|unsupported|mode_unsupported|bad_[a-z_]+)$/, 400],
  [/\.(conflict|already_[a-z_]+)$/, 409],
];

/** The HTTP status of an engine error code. */
export function statusOf(code: string): ContentfulStatusCode {
  const exact = STATUS_BY_CODE[code];
  if (exact) {
    return exact;
  }
  for (const [pattern, status] of STATUS_BY_SUFFIX) {
    if (pattern.test(code)) {
      return status;
    }
  }
  return 500;
}

export function errorBody(error: EngineError): ErrorBody {
  return {
    error: {
      code: error.code,
      message: error.message,
      ...(error.details && error.details.length > 0 ? { details: [...error.details] } : {}),
    },
  };
}

/** The one error path of the API: every thrown error becomes the documented body and status. */
export function onError(thrown: unknown, c: Context): Response {
  const error = ensureEngineError(thrown);
  const status = statusOf(error.code);
  if (status >= 500) {
    console.error(
      JSON.stringify({
        msg: "request failed",
        code: error.code,
        error: error.message,
        path: new URL(c.req.url).pathname,
      }),
    );
  }
  const shown =
    status >= 500 && error.code === "internal.error" ? new EngineError("internal.error", "internal error") : error;
  return c.json(errorBody(shown), status);
}
