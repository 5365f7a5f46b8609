/**
 * The limits rows of `npm run bench`:
 * - what a limit costs a call: the chain of 200 `http` tasks with a limit on
 *   every call (a concurrency and a rate it never reaches, so nothing waits),
 *   against the same chain without, run in turn in one `wrangler dev`, times
 *   from each run's journal;
 * - how many grants one limit object answers: acquire + release pairs over RPC
 *   from a Worker (scripts/bench/limit-grants.ts, in a `wrangler dev` of its
 *   own), by one caller in turn and by 32 at once.
 */
import { CHAIN_LENGTH } from "./bench-client.mjs";
import { median } from "./bench-scenarios.mjs";
import { startWranglerDev } from "./wrangler-dev.mjs";

/** Pairs each grant-rate sample makes. */
const GRANT_PAIRS = 2_000;

/** A chain of `length` nodes, each a one-step task calling `action`. @param {number} length @param {string} action */
function chainCalling(length, action) {
  /** @type {Record<string, unknown>} */
  const nodes = {};
  for (let i = 0; i < length; i += 1) {
    nodes[`n${i}`] = { task: { steps: [{ ref: "get", action }] }, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
  }
  return nodes;
}

/**
 * Registers the two chains and measures them in turn, `repeats` times each
 * after one unmeasured run of each; gives the table's rows.
 * @param {ReturnType<typeof import("./bench-client.mjs").benchClient>} client
 * @param {string} peerUrl
 * @param {number} repeats
 */
export async function measureLimitChain(client, peerUrl, repeats) {
  const implementation = { method: "GET", url_template: `${peerUrl}/wait?ms=0` };
  const ids = { limit: "bench-limit", free: "bench-call", limited: "bench-limited-call" };
  await client.api("POST", "/v1/definitions", {
    limits: [{ id: ids.limit, concurrency: 1000, rate: { limit: 1_000_000, period_ms: 60_000 } }],
    actions: [
      { id: ids.free, kind: "http", implementation },
      { id: ids.limited, kind: "http", implementation, limits: [{ limit: ids.limit }] },
    ],
    workflows: [
      { id: "bench-chain-call", nodes: chainCalling(CHAIN_LENGTH, ids.free) },
      { id: "bench-chain-limited", nodes: chainCalling(CHAIN_LENGTH, ids.limited) },
    ],
  });
  const free = [];
  const limited = [];
  for (let round = 0; round <= repeats; round += 1) {
    const a = (await client.timedRun("bench-chain-call", {})).ms / CHAIN_LENGTH;
    const b = (await client.timedRun("bench-chain-limited", {})).ms / CHAIN_LENGTH;
    if (round > 0) {
      free.push(a);
      limited.push(b);
    }
  }
  const ratios = limited.map((value, index) => value / (free[index] ?? value));
  return [
    [
      `chain of ${CHAIN_LENGTH} http tasks, a limit on each call`,
      "time per node",
      median(limited),
      "ms/node",
      median(ratios),
      `÷ the same chain without a limit (${median(free).toFixed(2)} ms/node), measured in turn`,
    ],
  ];
}

/**
 * Starts the grant-rate Worker and measures one object: one caller in turn,
 * then 32 at once, `repeats` samples each after one unmeasured; gives the rows.
 * @param {number} repeats
 */
export async function measureLimitGrants(repeats) {
  const dev = await startWranglerDev({ config: "scripts/bench/limit-grants.toml", migrations: false });
  try {
    const rows = [];
    for (const callers of [1, 32]) {
      const rates = [];
      for (let sample = 0; sample <= repeats; sample += 1) {
        const response = await fetch(`${dev.url}/grants?pairs=${GRANT_PAIRS}&callers=${callers}&key=c${callers}`);
        const body = /** @type {{ pairs: number, ms: number }} */ (await response.json());
        if (sample > 0) {
          rates.push((body.pairs / body.ms) * 1000);
        }
      }
      rows.push([
        `one limit object, ${callers === 1 ? "one caller in turn" : `${callers} callers at once`}`,
        "acquire + release pairs",
        median(rates),
        "pairs/s",
        Math.min(...rates),
        "lowest sample (pairs/s)",
      ]);
    }
    return rows;
  } finally {
    await dev.stop();
  }
}
