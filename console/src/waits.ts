/**
 * What a waiting run waits for, as the run page says it: where each wait is,
 * how long a timer or an event wait has to go, the anchor of a gate's card,
 * and the body of a signal sent from the page. Pure, so it is
 * unit-tested (test/node/console.test.ts).
 */
import type { RunWait } from "../../schemas/api.ts";
import { JsonValue } from "../../schemas/common.ts";
import type { AcceptedEvent, EventInput } from "../../schemas/events.ts";
import { stepName, type PlanStep } from "./plan-graph.ts";

/** The id of a gate's card on the run page, which a wait on that gate links to. */
export function gateAnchor(gateId: string): string {
  return `gate-${gateId}`;
}

/** Where a wait is: `node`, `node[item]`, then ` / step` when it is at a step. */
export function waitPlace(wait: RunWait, plan: readonly PlanStep[] | null): string {
  const node = wait.item === null ? wait.node : `${wait.node}[${wait.item}]`;
  return wait.step === null ? node : `${node} / ${stepName(wait.step, wait.node, plan)}`;
}

/**
 * The time left until a timer's end, to the second (rounded up, so it reads 1s
 * until the moment itself): `42s`, `1m 05s`, `2h 03m 10s`, `3d 04h 12m`; null
 * once it is due.
 */
export function formatCountdown(ms: number): string | null {
  if (ms <= 0) {
    return null;
  }
  const total = Math.ceil(ms / 1_000);
  const [days, hours, minutes, seconds] = [
    Math.floor(total / 86_400),
    Math.floor(total / 3_600) % 24,
    Math.floor(total / 60) % 60,
    total % 60,
  ];
  const two = (n: number): string => String(n).padStart(2, "0");
  if (days > 0) {
    return `${days}d ${two(hours)}h ${two(minutes)}m`;
  }
  if (hours > 0) {
    return `${hours}h ${two(minutes)}m ${two(seconds)}s`;
  }
  return minutes > 0 ? `${minutes}m ${two(seconds)}s` : `${seconds}s`;
}

/** How long a wait has gone on, to the second (rounded down): `42s`, `1m 05s`; null under a second. */
export function formatWaited(ms: number): string | null {
  return formatCountdown(Math.floor(ms / 1_000) * 1_000);
}

/** A signal's body from the form's fields, or what is wrong with them. */
export type SignalBody = { ok: true; body: EventInput } | { ok: false; error: string };

/**
 * The body of `POST /v1/runs/{run_id}/signals` from the signal form: `data`
 * is JSON (none when left empty), `id` optional; data that is not JSON is
 * refused here, before anything is sent.
 */
export function toSignalBody(name: string, dataText: string, idText: string): SignalBody {
  const id = idText.trim();
  const body: EventInput = { name, ...(id === "" ? {} : { id }) };
  if (dataText.trim() === "") {
    return { ok: true, body };
  }
  let data: unknown;
  try {
    data = JSON.parse(dataText);
  } catch (error) {
    return { ok: false, error: `Data is not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  const parsed = JsonValue.safeParse(data);
  return parsed.success
    ? { ok: true, body: { ...body, data: parsed.data } }
    : { ok: false, error: `Data is not JSON: ${parsed.error.issues[0]?.message ?? "not a JSON value"}` };
}

/** What became of a sent signal, in words: `accepted as evt_…`, or a duplicate of an earlier one. */
export function signalAnswerText(answer: AcceptedEvent): string {
  return answer.duplicate
    ? `duplicate: ${answer.event_id} was accepted before, so this one changed nothing`
    : `accepted as ${answer.event_id}`;
}
