/**
 * The plan scenario of `npm run bench` (and of `npm run bench:plans`, which
 * runs it alone): N independent plan steps that each wait 300 ms at the wait
 * peer, against the same N steps chained (each `depends_on` the one before),
 * for N = 3, 5, 10. The dependency notation claims an N× speedup for
 * independent steps; `maxParallelExecutions` is set to N so that its default
 * of 5 does not cap N = 10. Times come from each run's signed journal
 * (`run.created` to the attestation).
 */

/** How long each plan step waits at the peer. */
export const PLAN_STEP_MS = 300;

/** The plan sizes measured. */
export const PLAN_SIZES = [3, 5, 10];

/**
 * Registers the step's action and measures every size; gives the table's rows.
 * @param {{ api: (method: string, path: string, body?: unknown) => Promise<Record<string, unknown>> }} client
 * @param {string} peerUrl
 * @param {number} repeats
 */
export async function measurePlans(client, peerUrl, repeats) {
  const action = "bench-plan-wait";
  await client.api("POST", "/v1/definitions", {
    actions: [
      {
        id: action,
        kind: "http",
        implementation: { method: "GET", url_template: `${peerUrl}/wait?ms=${PLAN_STEP_MS}` },
      },
    ],
  });
  await timedPlan(client, planOf(action, 1, false)); // warm-up, unmeasured
  const rows = [];
  for (const n of PLAN_SIZES) {
    const parallel = await medianOf(repeats, () => timedPlan(client, planOf(action, n, false)));
    const chained = await medianOf(repeats, () => timedPlan(client, planOf(action, n, true)));
    rows.push([
      `plan: ${n} independent × ${PLAN_STEP_MS} ms steps`,
      "total",
      parallel,
      "ms",
      chained / parallel,
      `speedup over the same ${n} chained (ideal ${n})`,
    ]);
    rows.push([
      `plan: ${n} chained × ${PLAN_STEP_MS} ms steps`,
      "total",
      chained,
      "ms",
      chained / (n * PLAN_STEP_MS),
      `÷ ${n} × ${PLAN_STEP_MS} ms of waiting`,
    ]);
  }
  return rows;
}

/** A dependency-notation plan of `n` steps calling `action`, each after the previous one when `chained`. */
function planOf(action, n, chained) {
  const steps = Array.from({ length: n }, (_, i) => ({
    tool: action,
    params: {},
    ...(chained && i > 0 ? { depends_on: [i - 1] } : {}),
  }));
  return { plan: { steps, config: { maxParallelExecutions: n, maxRetries: 0 } }, tools: [action] };
}

/** @param {number} repeats @param {() => Promise<number>} measure */
async function medianOf(repeats, measure) {
  const samples = [];
  for (let i = 0; i < repeats; i += 1) {
    samples.push(await measure());
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

/**
 * Runs a plan to its end; its duration (ms) from its journal.
 * @param {{ api: (method: string, path: string, body?: unknown) => Promise<Record<string, unknown>> }} client
 * @param {unknown} body
 */
async function timedPlan(client, body) {
  const { run_id: runId } = await client.api("POST", "/v1/plans", body);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const run = await client.api("GET", `/v1/runs/${runId}`);
    if (run.status === "completed") {
      break;
    }
    if (run.status === "failed" || run.status === "cancelled" || Date.now() > deadline) {
      throw new Error(`plan run ${runId} ended ${run.status}: ${JSON.stringify(run.error)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const { entries } = await client.api("GET", `/v1/runs/${runId}/journal`);
  return Date.parse(entries.at(-1).at) - Date.parse(entries[0].at);
}
