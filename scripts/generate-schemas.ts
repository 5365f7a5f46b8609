/**
 * `npm run schemas`: writes the generated contracts (the definition bundle's
 * JSON Schema, the OpenAPI document, the client's plain types) from schemas/
 * and src/contracts/routes.ts. test/node/contracts.test.ts fails while a
 * committed file differs from what this would write.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { generateContracts } from "../src/contracts/generate.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
for (const [path, content] of Object.entries(generateContracts())) {
  mkdirSync(dirname(resolve(root, path)), { recursive: true });
  writeFileSync(resolve(root, path), content);
  console.log(`wrote ${path}`);
}
