import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { sha256Hex } from "../lib/ids.ts";
import { toHex } from "../lib/journal/encoding.ts";
import { unwrap } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { GateLinkBody, type GateLinkAnswer } from "../schemas/api.ts";
import type { Answerer } from "../schemas/approvers.ts";
import { byOf, type Principal } from "../schemas/auth.ts";
import { statusOf } from "./errors.ts";
import { formToResponse, renderAnswered, renderLinkPage, renderProblem, type FormFields } from "./link-page.ts";
import { coordinator } from "./service.ts";

/**
 * Approval links (docs/api.md, "Approval links"): `POST
 * /v1/runs/{run_id}/gates/{gate_id}/links` makes one; its URL carries a
 * 256-bit secret that only the run's hash of it can check. `GET` on the URL
 * shows the gate and a form, and decides nothing (mail scanners fetch links);
 * the form's `POST` answers, once, as the link's approver.
 */

/** How long a link lasts when the request names no `expires_in_ms`. */
export const DEFAULT_LINK_TTL_MS = 24 * 3_600_000;
/** The path of a link, below the deployment's origin. */
export const LINK_PATH = "/v1/links";

/** Who answers a gate, from the authenticated caller. */
export function answererOf(principal: Principal): Answerer {
  return { by: byOf(principal), roles: principal.roles };
}

/**
 * Makes a link of an open gate for one approver (the route needs the role `approver`, src/contracts/routes.ts);
 * `origin` is the deployment's, as the caller reached it.
 */
export async function createGateLink(
  env: Env,
  target: { runId: string; gateId: string },
  body: unknown,
  principal: Principal,
  origin: string,
): Promise<GateLinkAnswer> {
  const asked = parseOrThrow(GateLinkBody, body, "gate.invalid_link", "the link request");
  const link = await makeGateLink(env, target, { ...asked, once: false }, principal, origin);
  if (!link.made) {
    throw new EngineError("internal.error", "a link asked without once was not made");
  }
  return { url: link.url, link_id: link.link_id, expires_at: link.expires_at };
}

/**
 * Makes a link of the gate for `asked.approver`, by `principal` (its checks
 * made by the caller). With `once`, the live link the same principal made for
 * the same approver stands instead: its id and expiry, and no URL (the
 * secret was shown once, when it was made).
 */
export async function makeGateLink(
  env: Env,
  target: { runId: string; gateId: string },
  asked: GateLinkBody & { once: boolean },
  principal: Principal,
  origin: string,
): Promise<MadeLink> {
  const random = (bytes: number): string => toHex(crypto.getRandomValues(new Uint8Array(bytes)));
  const linkId = `lnk_${random(8)}`;
  const secret = random(32);
  const request = {
    link_id: linkId,
    secret_sha256: await sha256Hex(secret),
    approver: asked.approver,
    expires_at: Date.now() + (asked.expires_in_ms ?? DEFAULT_LINK_TTL_MS),
    created_by: byOf(principal),
    ...(asked.once ? { once: true } : {}),
  };
  const made = unwrap(await coordinator(env, target.runId).linkGate(target.gateId, request));
  if (!made.made) {
    return { made: false, expires_at: made.expires_at };
  }
  return {
    made: true,
    url: `${origin}${LINK_PATH}/${target.runId}/${linkId}/${secret}`,
    link_id: linkId,
    expires_at: made.expires_at,
  };
}

/** A link just made (its URL carries the secret, shown only now), or the live one that stood instead. */
export type MadeLink =
  { made: true; url: string; link_id: string; expires_at: string } | { made: false; expires_at: string };

/** What a link's URL names: the run, the link and its secret. */
export interface LinkTarget {
  runId: string;
  linkId: string;
  secret: string;
}

/** `GET` on a link: the gate's prompt and a form; nothing is decided. */
export async function linkPage(env: Env, target: LinkTarget): Promise<Response> {
  try {
    const { gate, approver } = unwrap(await coordinator(env, target.runId).linkedGate(target.linkId, target.secret));
    return html(200, renderLinkPage(gate, approver));
  } catch (error) {
    return problemPage(error);
  }
}

/** The form's `POST`: the answer, recorded as `by: { link, approver }`; a used link is 409, an expired one 410. */
export async function answerLink(env: Env, target: LinkTarget, form: FormFields): Promise<Response> {
  try {
    const run = coordinator(env, target.runId);
    const { gate } = unwrap(await run.linkedGate(target.linkId, target.secret));
    const answer = formToResponse(gate, form);
    const answered = unwrap(await run.answerByLink(target.linkId, target.secret, answer));
    return html(200, renderAnswered(answered));
  } catch (error) {
    return problemPage(error);
  }
}

function problemPage(thrown: unknown): Response {
  const error = ensureEngineError(thrown);
  const status = statusOf(error.code);
  if (status >= 500) {
    console.error(JSON.stringify({ message: "approval link failed", code: error.code, error: error.message }));
  }
  return html(status, renderProblem(status, error));
}

/**
 * The page's headers: the console's strict policy and more (no script at
 * all, styles from this origin, the form posts back here only), never
 * cached, never indexed, and no referrer that would carry the secret away.
 */
const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy":
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-robots-tag": "noindex, nofollow",
};

function html(status: number, body: string): Response {
  return new Response(body, { status, headers: PAGE_HEADERS });
}
