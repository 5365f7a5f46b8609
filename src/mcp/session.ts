import { sha256Hex } from "../../lib/ids.ts";
import { toHex } from "../../lib/journal/encoding.ts";

/**
 * The server keeps nothing between requests (a Worker has no memory that
 * outlives one), so the session id it hands out at `initialize` carries what
 * later requests need to know of the client: whether it declared form
 * elicitation. `trellis-mcp.<f|->.<nonce>`: `f` when it did, and 128 random
 * bits that make each session's id its own (what derived idempotency keys are
 * scoped by). The id grants nothing: every request carries its bearer token.
 */

const SESSION_PREFIX = "trellis-mcp";
const SESSION_PATTERN = /^trellis-mcp\.([f-])\.([0-9a-f]{32})$/;

/** What a request's `Mcp-Session-Id` says of its client. */
export interface SessionTraits {
  /** The session's id, when the request carries one this server made. */
  id: string | null;
  /** Whether the client declared form elicitation at `initialize`. */
  elicitation: boolean;
}

/** A new session id for a client that declared `capabilities` at `initialize`. */
export function createSessionId(capabilities: unknown, random: (bytes: number) => Uint8Array = randomBytes): string {
  return `${SESSION_PREFIX}.${declaresFormElicitation(capabilities) ? "f" : "-"}.${toHex(random(16))}`;
}

/** The traits of a request's session header; none (and no elicitation) for a header this server did not make. */
export function sessionTraits(header: string | null): SessionTraits {
  const match = header === null ? null : SESSION_PATTERN.exec(header);
  if (match === null || header === null) {
    return { id: null, elicitation: false };
  }
  return { id: header, elicitation: match[1] === "f" };
}

/**
 * Whether `capabilities.elicitation` admits form mode: an empty object does
 * (as the protocol first defined it), else it must name `form`.
 */
export function declaresFormElicitation(capabilities: unknown): boolean {
  if (typeof capabilities !== "object" || capabilities === null || !("elicitation" in capabilities)) {
    return false;
  }
  const elicitation = capabilities.elicitation;
  if (typeof elicitation !== "object" || elicitation === null) {
    return false;
  }
  return "form" in elicitation || !("url" in elicitation);
}

/**
 * The idempotency key of a workflow tool's call (docs/mcp.md, "One run per
 * tool call"): the client's own, from the request's `_meta`, as it is (the
 * same key as the API's `idempotency_key`); else one derived from the
 * session and the JSON-RPC request id, so the same request sent again in the
 * same session finds its run; none without a session, where request ids
 * repeat across connections.
 */
export async function toolCallKey(
  meta: Record<string, unknown> | undefined,
  sessionId: string | null,
  requestId: string | number,
): Promise<string | undefined> {
  const given = meta?.[IDEMPOTENCY_META_KEY];
  if (typeof given === "string" && given.length > 0 && given.length <= 256) {
    return given;
  }
  if (sessionId === null) {
    return undefined;
  }
  return `mcp:${await sha256Hex(`${sessionId}\n${JSON.stringify(requestId)}`)}`;
}

/** The `_meta` key a client names its own idempotency key with. */
export const IDEMPOTENCY_META_KEY = "trellis/idempotency_key";

function randomBytes(bytes: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(bytes));
}

/** The `_meta` key a client bounds a workflow tool's wait with, in seconds (0 to 60). */
export const WAIT_META_KEY = "trellis/wait_seconds";

/** The bound a client set on a workflow tool's wait in `_meta`, in ms: a whole number of seconds 0–60, else none. */
export function toolCallWaitMs(meta: Record<string, unknown> | undefined): number | undefined {
  const given = meta?.[WAIT_META_KEY];
  return typeof given === "number" && Number.isInteger(given) && given >= 0 && given <= 60 ? given * 1000 : undefined;
}
