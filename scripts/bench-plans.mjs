#!/usr/bin/env node
/**
 * `npm run bench:plans`: only the plan scenario of `npm run bench`
 * (scripts/lib/bench-plans.mjs), in real workerd (`wrangler dev`): N
 * independent 300 ms plan steps against the same steps chained, N = 3, 5, 10.
 * Options: BENCH_REPEATS=N (default 3).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { benchClient, startWaitPeerProcess } from "./lib/bench-client.mjs";
import { measurePlans } from "./lib/bench-plans.mjs";
import { startWranglerDev } from "./lib/wrangler-dev.mjs";

const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);

async function main() {
  const token = `bench-${randomBytes(8).toString("hex")}`;
  const peer = await startWaitPeerProcess();
  const signingKey = generateKeyPairSync("ed25519")
    .privateKey.export({ type: "pkcs8", format: "der" })
    .toString("base64");
  const dev = await startWranglerDev({ vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } });
  try {
    const rows = await measurePlans(benchClient(dev.url, token), peer.url, REPEATS);
    console.log(
      `\nPlan steps, parallel vs chained (wrangler dev, median of ${REPEATS}; times from the signed journal)\n`,
    );
    console.log("| scenario | total ms | ratio | ratio meaning |");
    console.log("|---|---|---|---|");
    for (const [scenario, , value, , ratio, meaning] of rows) {
      console.log(`| ${scenario} | ${value.toFixed(1)} | ${ratio.toFixed(2)} | ${meaning} |`);
    }
  } finally {
    await dev.stop();
    peer.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
