/**
 * A limit and its status in words, as the console's Limits page and `trellis
 * limits` show them: the budgets as the definition writes them, a window's
 * period, the slots in use against `concurrency`, and each window's use
 * against its budget. Pure, so it is unit-tested (test/node/limit-text.test.ts).
 */
import { z } from "zod";
import { LimitWindow, type LimitStatus } from "../schemas/limits.ts";

/** The budgets of a stored `limits` definition (`GET /v1/limits/{id}`'s `definition`); its other fields are dropped. */
export const LimitBudgets = z.object({
  concurrency: z.number().int().optional(),
  rate: LimitWindow.optional(),
  tokens: LimitWindow.optional(),
});
export type LimitBudgets = z.infer<typeof LimitBudgets>;

/** A window of a status beside its budget: `rate` counts grants, `tokens` counts model tokens. */
export interface WindowUse {
  name: "rate" | "tokens";
  used: number;
  limit: number;
  period_ms: number;
  resets_at: string | null;
}

const UNITS: readonly [string, number][] = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1_000],
  ["ms", 1],
];

/** A period exactly, in its largest units: `1m`, `1m 30s`, `1h`, `1d`, `1s 500ms`, `250ms`. */
export function periodText(ms: number): string {
  const parts: string[] = [];
  let left = ms;
  for (const [unit, size] of UNITS) {
    const count = Math.floor(left / size);
    if (count > 0) {
      parts.push(`${count}${unit}`);
      left -= count * size;
    }
  }
  return parts.length === 0 ? "0ms" : parts.join(" ");
}

/** The budgets as written: `concurrency 2 · rate 10 per 1m · tokens 50000 per 1h`. */
export function budgetsText(budgets: LimitBudgets): string {
  const parts = [
    budgets.concurrency === undefined ? null : `concurrency ${budgets.concurrency}`,
    budgets.rate === undefined ? null : `rate ${budgets.rate.limit} per ${periodText(budgets.rate.period_ms)}`,
    budgets.tokens === undefined ? null : `tokens ${budgets.tokens.limit} per ${periodText(budgets.tokens.period_ms)}`,
  ];
  return parts.filter((part) => part !== null).join(" · ");
}

/** The slots held: `1/2` against `concurrency`, or the bare count for a limit without one. */
export function inUseText(status: Pick<LimitStatus, "in_use">, budgets: LimitBudgets): string {
  return budgets.concurrency === undefined ? String(status.in_use) : `${status.in_use}/${budgets.concurrency}`;
}

/**
 * The status's windows beside their budgets, rate first: the status's
 * `window` is the tokens window when the limit has `tokens`, else the rate
 * window, and `rate_window` is the rate window of a limit with both. A window
 * whose budget the definition does not have is left out.
 */
export function windowsOf(status: Pick<LimitStatus, "window" | "rate_window">, budgets: LimitBudgets): WindowUse[] {
  const use = (name: WindowUse["name"], budget: LimitWindow, window: LimitStatus["window"]): WindowUse => ({
    name,
    used: window.used,
    limit: budget.limit,
    period_ms: budget.period_ms,
    resets_at: window.resets_at,
  });
  if (budgets.tokens === undefined) {
    return budgets.rate === undefined ? [] : [use("rate", budgets.rate, status.window)];
  }
  const rate = budgets.rate !== undefined && status.rate_window !== undefined ? status.rate_window : null;
  return [
    ...(rate === null || budgets.rate === undefined ? [] : [use("rate", budgets.rate, rate)]),
    use("tokens", budgets.tokens, status.window),
  ];
}

/** A window's use in words: `rate 3/10 per 1m`, `tokens 1200/50000 per 1h`. */
export function windowText(window: WindowUse): string {
  return `${window.name} ${window.used}/${window.limit} per ${periodText(window.period_ms)}`;
}

/** A key as the pages print it: quoted, so the empty key reads `""`. */
export function keyText(key: string): string {
  return JSON.stringify(key);
}
