/**
 * What a waiting run waits for, as the run page says it: where each wait is,
 * how long a timer has to go, and the anchor of a gate's card. Pure, so it is
 * unit-tested (test/node/console.test.ts).
 */
import type { RunWait } from "../../schemas/api.ts";
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
