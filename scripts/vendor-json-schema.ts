/**
 * Writes lib/vendor/cfworker-json-schema/validate.js: @cfworker/json-schema's
 * dist/esm/validate.js with the changes listed in {@link EDITS} and nothing else.
 * test/node/json-schema-vendor.test.ts checks that the committed file is exactly what
 * this makes of the installed package, so an upgrade of the package fails that test
 * until this is run again (and each edit still applies where it should).
 *
 *   node scripts/vendor-json-schema.ts
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The package version the edits were written against. */
export const VENDORED_VERSION = "4.1.6";

const ROOT = new URL("../", import.meta.url);
export const UPSTREAM_PATH = fileURLToPath(new URL("node_modules/@cfworker/json-schema/dist/esm/validate.js", ROOT));
export const UPSTREAM_PACKAGE_PATH = fileURLToPath(new URL("node_modules/@cfworker/json-schema/package.json", ROOT));
export const VENDORED_PATH = fileURLToPath(new URL("lib/vendor/cfworker-json-schema/validate.js", ROOT));

const LICENSE = `MIT License

Copyright (c) 2020 Jeremy Danyow

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.`;

interface Edit {
  readonly why: string;
  readonly from: string | RegExp;
  readonly to: string;
  /** How many times `from` must occur in the upstream file. */
  readonly count: number;
}

const UPSTREAM_IMPORTS = `import { deepCompareStrict } from './deep-compare-strict.js';
import { dereference } from './dereference.js';
import { format } from './format.js';
import { encodePointer } from './pointer.js';
import { ucs2length } from './ucs2-length.js';`;

const UNIQUE_ITEMS = `        if ($uniqueItems) {
            for (let j = 0; j < length; j++) {
                const a = instance[j];
                const ao = typeof a === 'object' && a !== null;
                for (let k = 0; k < length; k++) {
                    if (j === k) {
                        continue;
                    }
                    const b = instance[k];
                    const bo = typeof b === 'object' && b !== null;
                    if (a === b || (ao && bo && deepCompareStrict(a, b))) {
                        errors.push({
                            instanceLocation,
                            keyword: 'uniqueItems',
                            keywordLocation: \`\${schemaLocation}/uniqueItems\`,
                            error: \`Duplicate items at indexes \${j} and \${k}.\`
                        });
                        j = Number.MAX_SAFE_INTEGER;
                        k = Number.MAX_SAFE_INTEGER;
                    }
                }
            }
        }`;

const SIGNATURE =
  "export function validate(instance, schema, draft = '2019-09', lookup = dereference(schema), shortCircuit = true, recursiveAnchor = null, instanceLocation = '#', schemaLocation = '#', evaluated = Object.create(null)) {";

/** Each change to the upstream file, in order. */
export const EDITS: readonly Edit[] = [
  {
    why: "imports from the package root (its other modules are used as they are) and the hooks",
    from: UPSTREAM_IMPORTS,
    to: `import { deepCompareStrict, dereference, encodePointer, ucs2length } from '@cfworker/json-schema';
import { SCHEMA_FORMATS as format } from '../../json-schema-formats.ts';
import { appendErrors, compilePattern, enterSubschema, exitSubschema, findDuplicateItems } from '../../json-schema-hooks.ts';`,
    count: 1,
  },
  {
    why: "the body becomes validateSubschema; validate (appended below) wraps every application",
    from: SIGNATURE,
    to: SIGNATURE.replace("export function validate(", "function validateSubschema("),
    count: 1,
  },
  {
    why: "patternProperties keys run on the linear-time engine",
    from: "const regex = new RegExp(pattern, 'u');",
    to: "const regex = compilePattern(pattern);",
    count: 1,
  },
  {
    why: "pattern runs on the linear-time engine",
    from: "!new RegExp($pattern, 'u').test(instance)",
    to: "!compilePattern($pattern).test(instance)",
    count: 1,
  },
  {
    why: "uniqueItems in one pass, charged (the pairwise loop is quadratic)",
    from: UNIQUE_ITEMS,
    to: `        if ($uniqueItems) {
            const duplicate = findDuplicateItems(instance);
            if (duplicate !== undefined) {
                errors.push({
                    instanceLocation,
                    keyword: 'uniqueItems',
                    keywordLocation: \`\${schemaLocation}/uniqueItems\`,
                    error: \`Duplicate items at indexes \${duplicate[0]} and \${duplicate[1]}.\`
                });
            }
        }`,
    count: 1,
  },
  {
    why: "errors appended, not spread into push (which overflows the stack on long lists)",
    from: /\}, \.\.\.(\w+)\.errors\);/g,
    to: "}); appendErrors(errors, $1.errors);",
    count: 16,
  },
  {
    why: "the same where a result's errors are appended alone",
    from: /errors\.push\(\.\.\.(\w+)\.errors\);/g,
    to: "appendErrors(errors, $1.errors);",
    count: 4,
  },
];

const WRAPPER = `
export function validate(instance, schema, draft, lookup, shortCircuit, recursiveAnchor, instanceLocation, schemaLocation, evaluated) {
    enterSubschema(instance, schema);
    try {
        return validateSubschema(instance, schema, draft, lookup, shortCircuit, recursiveAnchor, instanceLocation, schemaLocation, evaluated);
    }
    finally {
        exitSubschema();
    }
}
`;

function occurrences(text: string, from: string | RegExp): number {
  return typeof from === "string" ? text.split(from).length - 1 : (text.match(from) ?? []).length;
}

/** The vendored file made from `upstream` (the package's validate.js at `version`). */
export function vendorValidate(upstream: string, version: string): string {
  if (version !== VENDORED_VERSION) {
    throw new Error(
      `@cfworker/json-schema is ${version}; the edits were written against ${VENDORED_VERSION}: review its validate.js changes, then update VENDORED_VERSION`,
    );
  }
  let text = upstream.replace(/\n\/\/# sourceMappingURL=.*\n?$/, "\n");
  for (const edit of EDITS) {
    const found = occurrences(text, edit.from);
    if (found !== edit.count) {
      throw new Error(
        `edit "${edit.why}" expects ${edit.count} occurrence(s) of ${String(edit.from).slice(0, 80)}, found ${found}`,
      );
    }
    text = typeof edit.from === "string" ? text.split(edit.from).join(edit.to) : text.replace(edit.from, edit.to);
  }
  if (/new RegExp|\.\.\.\w+\.errors/.test(text)) {
    throw new Error("an upstream RegExp or error spread is left after the edits");
  }
  const header = [
    `/*`,
    ` * Vendored from @cfworker/json-schema ${version}, dist/esm/validate.js`,
    ` * (https://github.com/cfworker/cfworker, packages/json-schema), under this license:`,
    ` *`,
    ...LICENSE.split("\n").map((line) => (line === "" ? " *" : ` * ${line}`)),
    ` *`,
    ` * Generated by scripts/vendor-json-schema.ts; do not edit (test/node/json-schema-vendor.test.ts`,
    ` * checks this file is exactly its output). The changes, nothing else:`,
    ...EDITS.map((edit) => ` * - ${edit.why};`),
    ` * - validate, appended, counts nesting and charges each application (lib/json-schema-hooks.ts).`,
    ` */`,
    `/* eslint-disable -- vendored as the library wrote it, so the edits above stay checkable */`,
  ].join("\n");
  return `${header}\n${text.trimEnd()}\n${WRAPPER}`;
}

function main(): void {
  const version = (JSON.parse(readFileSync(UPSTREAM_PACKAGE_PATH, "utf8")) as { version: string }).version;
  writeFileSync(VENDORED_PATH, vendorValidate(readFileSync(UPSTREAM_PATH, "utf8"), version));
  console.log(`wrote ${VENDORED_PATH} from @cfworker/json-schema ${version}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main();
}
