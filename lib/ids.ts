import { toHex } from "./journal/encoding.ts";

/** Run ids: `run_` and 32 lowercase hex digits. */
export const RUN_ID_PATTERN = /^run_[0-9a-f]{32}$/;

/** A fresh, random run id. */
export function newRunId(): string {
  return `run_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** A fresh event id, for an event or a signal sent without one: `evt_` and 32 lowercase hex digits. */
export function newEventId(): string {
  return `evt_${crypto.randomUUID().replaceAll("-", "")}`;
}

/**
 * The run id a seed always names: the same idempotency key (or the same
 * parent step asking for a child) finds the same run.
 */
export async function runIdFor(seed: string): Promise<string> {
  return `run_${(await sha256Hex(seed)).slice(0, 32)}`;
}

export async function sha256Hex(text: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}
