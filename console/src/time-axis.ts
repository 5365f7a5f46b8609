/**
 * Bars on a time axis: where each bar starts and how wide it is, as
 * percentages of the span from the earliest start to the latest end, and
 * the ticks of the axis. The run page draws its nodes with it, the node
 * panel a dispatch's steps. Pure, so it is unit-tested
 * (test/node/console-agent.test.ts).
 */
import { formatMs } from "./calls.ts";

export interface BarInput {
  id: string;
  /** Milliseconds (epoch, or from any origin the bars share); null: not started, no bar. */
  start: number | null;
  /** null: still going; the bar runs to `now`. */
  end: number | null;
}

export interface Bar {
  id: string;
  leftPct: number;
  widthPct: number;
  durationMs: number;
  running: boolean;
}

export interface TimeAxis {
  bars: Bar[];
  spanMs: number;
  ticks: { pct: number; label: string }[];
}

const TICKS = 4;

/** The bars of `inputs` (those started) over their common span; a bar is at least a sliver wide. */
export function scaleBars(inputs: readonly BarInput[], now: number): TimeAxis {
  const started = inputs.filter((input): input is BarInput & { start: number } => input.start !== null);
  if (started.length === 0) {
    return { bars: [], spanMs: 0, ticks: [] };
  }
  const origin = Math.min(...started.map((input) => input.start));
  const endOf = (input: BarInput & { start: number }): number => Math.max(input.start, input.end ?? now);
  const spanMs = Math.max(1, Math.max(...started.map(endOf)) - origin);
  const pct = (ms: number): number => (ms / spanMs) * 100;
  const bars = started.map((input) => ({
    id: input.id,
    leftPct: pct(input.start - origin),
    widthPct: Math.max(0.5, pct(endOf(input) - input.start)),
    durationMs: endOf(input) - input.start,
    running: input.end === null,
  }));
  const ticks = Array.from({ length: TICKS + 1 }, (_, index) => ({
    pct: (index / TICKS) * 100,
    label: formatMs((spanMs * index) / TICKS),
  }));
  return { bars, spanMs, ticks };
}

/** Steps that ran one after another, as bars from the dispatch's start: each begins where the one before ended. */
export function sequentialBars(steps: readonly { id: string; durationMs: number }[]): TimeAxis {
  let at = 0;
  const inputs = steps.map((step) => {
    const input = { id: step.id, start: at, end: at + step.durationMs };
    at += step.durationMs;
    return input;
  });
  return scaleBars(inputs, at);
}
