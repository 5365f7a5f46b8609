import { MAX_START_WAIT_MS } from "../schemas/api.ts";

/** The longest `Prefer` header read: a preference list is a handful of tokens. */
const MAX_PREFER_CHARS = 1_024;

/**
 * The `wait` preference of an RFC 7240 `Prefer` header (`Prefer: wait=10`,
 * delta-seconds), in milliseconds, at most {@link MAX_START_WAIT_MS}: how
 * long a run start may hold its answer for the run to end. Null when the
 * header has no well-formed `wait`: a preference that cannot be honoured is
 * ignored (RFC 7240 §2), the request itself is not refused.
 */
export function preferredWaitMs(header: string | undefined): number | null {
  if (header === undefined || header.length > MAX_PREFER_CHARS) {
    return null;
  }
  for (const preference of header.split(",")) {
    const [token = ""] = preference.split(";");
    const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*$/i.exec(token);
    if (match?.[1] !== undefined) {
      return Math.min(Number(match[1]) * 1000, MAX_START_WAIT_MS);
    }
  }
  return null;
}

/** The `Preference-Applied` header's value for a wait of `waitMs`. */
export function appliedWait(waitMs: number): string {
  return `wait=${Math.floor(waitMs / 1000)}`;
}
