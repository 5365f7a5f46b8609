import { parseDocument, Parser } from "yaml";
import type { CST } from "yaml";
import { EngineError } from "./errors.ts";
import { MAX_BODY_DEPTH } from "./json-limits.ts";

/** At most this many alias expansions per document ("billion laughs"). */
export const MAX_YAML_ALIASES = 100;

/**
 * A YAML body as plain JSON data: YAML 1.2 core schema only (no custom tags,
 * no code), unique keys, aliases bounded. The nesting of its collections is
 * measured on the parser's token tree first (an iterative walk), so a document
 * nested deeper than {@link MAX_BODY_DEPTH} is refused before the recursive
 * composer sees it. The result still goes through `checkBodyLimits` like a
 * JSON body (aliases and `[a: b]` pairs can nest the data deeper than its text).
 */
export function parseYamlBody(text: string): unknown {
  const tooDeep = deepestCollection(text);
  if (tooDeep !== null) {
    throw EngineError.terminal(
      "request.too_deep",
      `the body nests too deeply (at most ${MAX_BODY_DEPTH} levels of arrays and objects): line ${tooDeep.line}`,
      [
        {
          path: "",
          message: `collections nest deeper than ${MAX_BODY_DEPTH} levels at line ${tooDeep.line}`,
          code: "request.too_deep",
        },
      ],
    );
  }
  const document = parseDocument(text, { schema: "core", uniqueKeys: true, prettyErrors: false, logLevel: "error" });
  const [problem] = document.errors;
  if (problem) {
    throw EngineError.terminal("request.invalid_yaml", `the body is not YAML: ${problem.message}`);
  }
  try {
    return document.toJS({ maxAliasCount: MAX_YAML_ALIASES }) as unknown;
  } catch (error) {
    throw EngineError.terminal(
      "request.invalid_yaml",
      `the body is not usable YAML: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** The first collection nested deeper than the limit (its line), or null. */
function deepestCollection(text: string): { line: number } | null {
  const stack: { token: CST.Token; depth: number }[] = [];
  for (const token of new Parser().parse(text)) {
    stack.push({ token, depth: 0 });
    for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
      const { token: current, depth } = item;
      const collection =
        current.type === "block-map" || current.type === "block-seq" || current.type === "flow-collection";
      if (collection && depth >= MAX_BODY_DEPTH) {
        return { line: lineOf(text, current.offset) };
      }
      for (const child of children(current)) {
        stack.push({ token: child, depth: collection ? depth + 1 : depth });
      }
    }
  }
  return null;
}

/** The tokens nested in a token: a document's value, a collection's keys and values, a block scalar's properties. */
function children(token: CST.Token): CST.Token[] {
  switch (token.type) {
    case "document":
      return token.value ? [token.value] : [];
    case "block-map":
    case "block-seq":
    case "flow-collection":
      return token.items.flatMap((item) =>
        [item.key, item.value].filter((child): child is CST.Token => child !== null && child !== undefined),
      );
    default:
      return [];
  }
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let index = 0; index < offset && index < text.length; index++) {
    if (text.charCodeAt(index) === 0x0a) {
      line += 1;
    }
  }
  return line;
}
