import type { NodeView, StepSummary } from "../schemas/index.ts";

/**
 * A node of a run as `trellis show` prints it: its status and attempts, then
 * its steps. A foreach node says how many items it has and how they stand,
 * and counts attempts and calls per item: the view's `attempts` sums every
 * item's, which would read as retries of one task.
 */
export function nodeLines(id: string, node: NodeView): string[] {
  if (node.items === undefined) {
    const steps = node.invocations[0]?.steps ?? [];
    return [`  ${node.status.padEnd(10)} ${id}  attempts ${node.attempts}`, ...steps.map(stepLine)];
  }
  const { total, ...counts } = node.items;
  const standing = Object.entries(counts)
    .filter(([, count]) => count > 0)
    .map(([status, count]) => `${count} ${status}`);
  const ran = node.invocations.filter((invocation) => invocation.attempts > 0);
  const attempts = ran.length > 0 ? `  attempts ${perItem(ran.map((invocation) => invocation.attempts))}` : "";
  const listed = node.invocations.length < total ? ` (steps of the first ${node.invocations.length})` : "";
  const items = `${total} item${total === 1 ? "" : "s"}${standing.length > 0 ? `: ${standing.join(", ")}` : ""}`;
  return [
    `  ${node.status.padEnd(10)} ${id}  ${items}${attempts}${listed}`,
    ...stepsOverItems(node.invocations.map((invocation) => invocation.steps)),
  ];
}

function stepLine(step: StepSummary): string {
  const calls = step.attempts > 1 ? `  ${step.attempts} calls` : "";
  const tokens = step.tokens ? `  ${step.tokens.input} in / ${step.tokens.output} out tokens` : "";
  return `      ${step.status.padEnd(10)} ${step.step}${calls}${tokens}${step.error ? `  ${step.error}` : ""}`;
}

/** Each step over the items that reached it: how many ended how, its calls per item, its tokens in all. */
function stepsOverItems(items: readonly (readonly StepSummary[])[]): string[] {
  const byStep = new Map<string, StepSummary[]>();
  for (const step of items.flat()) {
    byStep.set(step.step, [...(byStep.get(step.step) ?? []), step]);
  }
  return [...byStep].map(([ref, runs]) => {
    const statuses = new Map<string, number>();
    for (const run of runs) {
      statuses.set(run.status, (statuses.get(run.status) ?? 0) + 1);
    }
    const standing = [...statuses].map(([status, count]) => `${status} ${count}`).join(", ");
    const errors = [...new Set(runs.flatMap((run) => (run.error === undefined ? [] : [run.error])))];
    const input = runs.reduce((sum, run) => sum + (run.tokens?.input ?? 0), 0);
    const output = runs.reduce((sum, run) => sum + (run.tokens?.output ?? 0), 0);
    const tokens = runs.some((run) => run.tokens) ? `  ${input} in / ${output} out tokens` : "";
    const calls = `  calls ${perItem(runs.map((run) => run.attempts))}`;
    return `      ${ref}  ${standing}${calls}${tokens}${errors.length > 0 ? `  ${errors.join(", ")}` : ""}`;
  });
}

/** `2 per item`, or `1–3 per item` when the items differ. */
function perItem(counts: readonly number[]): string {
  const [least, most] = [Math.min(...counts), Math.max(...counts)];
  return `${least === most ? least : `${least}–${most}`} per item`;
}
