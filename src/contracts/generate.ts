import { definitionsJsonSchema } from "./json-schema.ts";
import { componentSchemas, openApiDocument } from "./openapi.ts";
import { typeScriptOf } from "./typescript.ts";

/**
 * The generated contracts, by their path from the repository root: what
 * `npm run schemas` writes and what test/node/contracts.test.ts compares with
 * the committed files, so they cannot drift from schemas/ and the route table.
 */
export function generateContracts(): Record<string, string> {
  return {
    "schemas/json/definitions.schema.json": `${JSON.stringify(definitionsJsonSchema(), null, 2)}\n`,
    "schemas/json/openapi.json": `${JSON.stringify(openApiDocument(), null, 2)}\n`,
    "client/types.ts": typeScriptOf(componentSchemas(), CLIENT_TYPES_HEADER, { JsonValue: "Json" }),
  };
}

const CLIENT_TYPES_HEADER = `/**
 * Plain types of the Trellis API's bodies: generated from the zod schemas in
 * schemas/ by \`npm run schemas\` (src/contracts/generate.ts); do not edit.
 * Import them from client/index.ts.
 */

/** Any JSON value. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
`;
