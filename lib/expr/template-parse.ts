import * as handlebarsParser from "@handlebars/parser";

// Before and around the parser: the nesting bound measured on its tokens, and its errors as messages.

/**
 * The nesting the parser would build, measured on the parser's own tokens (so raw blocks,
 * escaped mustaches, comments and string literals are read exactly as the parser reads
 * them), in one linear pass that stops once it passes `limit`: open blocks, inverted
 * sections, partial and raw blocks, plus each chained `{{else …}}` inside them, plus open
 * sub-expression parentheses and array brackets. A lexing error ends the count; the parse
 * that follows reports it.
 */
export function measureNesting(source: string, limit: number): number {
  const lexer = Object.create(HANDLEBARS_LEXER) as JisonLexer;
  lexer.setInput(source, {});
  const chains: number[] = [];
  let open = 0;
  let brackets = 0;
  let deepest = 0;
  try {
    for (let token = lexer.lex(); token !== TOKENS.EOF && deepest <= limit; token = lexer.lex()) {
      if (
        token === TOKENS.OPEN_BLOCK ||
        token === TOKENS.OPEN_INVERSE ||
        token === TOKENS.OPEN_PARTIAL_BLOCK ||
        token === TOKENS.OPEN_RAW_BLOCK
      ) {
        chains.push(0);
        open += 1;
      } else if (token === TOKENS.OPEN_INVERSE_CHAIN) {
        chains.push((chains.pop() ?? 0) + 1);
        open += 1;
      } else if (token === TOKENS.OPEN_ENDBLOCK || token === TOKENS.END_RAW_BLOCK) {
        open = Math.max(0, open - 1 - (chains.pop() ?? 0));
      } else if (token === TOKENS.OPEN_SEXPR || token === TOKENS.OPEN_ARRAY) {
        brackets += 1;
      } else if (token === TOKENS.CLOSE_SEXPR || token === TOKENS.CLOSE_ARRAY) {
        brackets = Math.max(0, brackets - 1);
      }
      deepest = Math.max(deepest, open + brackets);
    }
  } catch {
    // A lexing error: the parse reports it with its position.
  }
  return deepest;
}

/** The jison lexer of `@handlebars/parser`: exported at run time as `parser.lexer`, absent from its typings. */
interface JisonLexer {
  setInput(input: string, yy: object): unknown;
  lex(): unknown;
}

const TOKEN_NAMES = [
  "EOF",
  "OPEN_BLOCK",
  "OPEN_INVERSE",
  "OPEN_INVERSE_CHAIN",
  "OPEN_PARTIAL_BLOCK",
  "OPEN_RAW_BLOCK",
  "END_RAW_BLOCK",
  "OPEN_ENDBLOCK",
  "OPEN_SEXPR",
  "CLOSE_SEXPR",
  "OPEN_ARRAY",
  "CLOSE_ARRAY",
] as const;

/** Checked when this module loads: a parser release that moves its lexer fails every template test, loudly. */
function loadLexer(): { lexer: JisonLexer; tokens: Record<(typeof TOKEN_NAMES)[number], number> } {
  const host = (handlebarsParser as unknown as { parser?: { lexer?: unknown; terminals_?: unknown } }).parser;
  const lexer = host?.lexer as Partial<JisonLexer> | undefined;
  const terminals = host?.terminals_;
  if (
    typeof lexer?.setInput !== "function" ||
    typeof lexer.lex !== "function" ||
    typeof terminals !== "object" ||
    terminals === null
  ) {
    throw new Error(
      "@handlebars/parser no longer exposes parser.lexer / parser.terminals_; template nesting cannot be measured",
    );
  }
  const ids = new Map(Object.entries(terminals).map(([id, name]) => [String(name), Number(id)]));
  const tokens = {} as Record<(typeof TOKEN_NAMES)[number], number>;
  for (const name of TOKEN_NAMES) {
    const id = ids.get(name);
    if (id === undefined) {
      throw new Error(`@handlebars/parser has no token ${name}; template nesting cannot be measured`);
    }
    tokens[name] = id;
  }
  return { lexer: lexer as JisonLexer, tokens };
}

const { lexer: HANDLEBARS_LEXER, tokens: TOKENS } = loadLexer();

// ───────────────────────────── parse errors ─────────────────────────────

/** The shapes of what `@handlebars/parser` throws: jison parse errors and its `Exception`. */
interface ParserErrorShape {
  message?: unknown;
  lineNumber?: unknown;
  column?: unknown;
  hash?: { token?: unknown; text?: unknown; loc?: { last_line?: unknown; last_column?: unknown } };
}

export function describeParseError(thrown: unknown): string {
  if (typeof thrown !== "object" || thrown === null) {
    return `template does not parse: ${String(thrown)}`;
  }
  const error = thrown as ParserErrorShape;
  const message = typeof error.message === "string" ? error.message : "unknown parse error";
  const hash = error.hash;
  if (hash !== undefined) {
    const line = typeof hash.loc?.last_line === "number" ? hash.loc.last_line : undefined;
    const near = message.split("\n")[1];
    const what =
      hash.token === "EOF"
        ? "the template ends before a mustache or block is closed"
        : hash.token === "INVALID"
          ? `unexpected character ${JSON.stringify(hash.text)}`
          : `unexpected ${JSON.stringify(hash.text)}`;
    return `template does not parse${line === undefined ? "" : ` at line ${line}`}: ${what}${near === undefined ? "" : ` (near ${JSON.stringify(near)})`}`;
  }
  const bare = message.replace(/ - \d+:\d+$/, "");
  return typeof error.lineNumber === "number"
    ? `template does not parse at line ${error.lineNumber}: ${bare}`
    : `template does not parse: ${bare}`;
}
