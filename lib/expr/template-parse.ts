import * as handlebarsParser from "@handlebars/parser";
import type { AST } from "@handlebars/parser";

// Before and around the parser: the nesting bound measured on its tokens, braces after a
// mustache read as text, and the parser's errors as messages.

/**
 * The nesting the parser would build, measured on the parser's own tokens (so raw blocks,
 * escaped mustaches, comments and string literals are read exactly as the parser reads
 * them), in one linear pass that stops once it passes `limit`: open blocks, inverted
 * sections, partial and raw blocks, plus each chained `{{else …}}` inside them, plus open
 * sub-expression parentheses and array brackets. A lexing error ends the count; the parse
 * that follows reports it.
 */
export function measureNesting(source: string, limit: number): number {
  const chains: number[] = [];
  let open = 0;
  let brackets = 0;
  let deepest = 0;
  lexTokens(source, (token) => {
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
    return deepest <= limit;
  });
  return deepest;
}

/**
 * Runs `visit` on each token the parser's lexer reads from `source`, until the end or until
 * `visit` returns false. A lexing error ends it: the parse that follows reports it.
 */
function lexTokens(source: string, visit: (token: unknown, lexer: JisonLexer) => boolean): void {
  const lexer = Object.create(HANDLEBARS_LEXER) as JisonLexer;
  lexer.setInput(source, {});
  try {
    // The lexer's own end marker is what it returns forever at the end of a raw block left
    // open (`{{json x}}}}` opens one); the grammar's `EOF` ends every other state.
    for (let token = lexer.lex(); token !== TOKENS.EOF && token !== lexer.EOF; token = lexer.lex()) {
      if (!visit(token, lexer)) {
        return;
      }
    }
  } catch {
    // A lexing error: the parse reports it with its position.
  }
}

/** The jison lexer of `@handlebars/parser`: exported at run time as `parser.lexer`, absent from its typings. */
interface JisonLexer {
  setInput(input: string, yy: object): unknown;
  lex(): unknown;
  popState(): unknown;
  /** The text of the last token, as matched. */
  match: string;
  /** All the input consumed so far. */
  matched: string;
  /** What `lex()` returns at the end of input in a state without an EOF rule (the raw-block state). */
  EOF: unknown;
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
  "OPEN",
  "OPEN_UNESCAPED",
  "OPEN_PARTIAL",
  "CLOSE",
  "CLOSE_UNESCAPED",
  "CLOSE_RAW_BLOCK",
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

// ───────────────────────────── braces after a mustache ─────────────────────────────

/**
 * Stands in for a `}` written right after a mustache while the source is parsed: one UTF-16
 * code unit, so every line and column the parser reports is unchanged. A noncharacter: a
 * source that holds one anyway is parsed as written (and `}}}` after `{{x` is then an error).
 */
const BRACE_STAND_IN = "\uFDD0";

/** The tokens that open a mustache, a block or a partial, and how many `}` close each. */
const CLOSING_BRACES = new Map<unknown, number>([
  [TOKENS.OPEN_UNESCAPED, 3],
  [TOKENS.OPEN_RAW_BLOCK, 4],
  ...[TOKENS.OPEN, TOKENS.OPEN_BLOCK, TOKENS.OPEN_INVERSE, TOKENS.OPEN_INVERSE_CHAIN].map((id) => [id, 2] as const),
  ...[TOKENS.OPEN_ENDBLOCK, TOKENS.OPEN_PARTIAL, TOKENS.OPEN_PARTIAL_BLOCK].map((id) => [id, 2] as const),
]);

/**
 * A mustache may be followed by `}`: `{"title": {{json title}}}` is the mustache
 * `{{json title}}` and the text `}`. Handlebars' lexer reads `}}}` as the close of a
 * triple-stash `{{{…}}}` (and `}}}}` as a raw block's), so it refuses JSON that ends with a
 * helper. This finds, with the parser's own lexer, each mustache opened with `{{` (or `{{{`)
 * and closed with more braces than that, and returns the source with the extra ones as
 * {@link BRACE_STAND_IN}; {@link restoreBraces} puts them back into the parsed text. A
 * source no such mustache closes comes back as it is: a template that parsed before parses
 * the same, one that did not may now.
 */
export function standInForBraces(source: string): string {
  const extra = extraBraces(source);
  if (extra.length === 0 || source.includes(BRACE_STAND_IN)) {
    return source;
  }
  const chars = source.split("");
  for (const at of extra) {
    chars[at] = BRACE_STAND_IN;
  }
  return chars.join("");
}

/** The offsets of the braces that close mustaches beyond their own (see {@link standInForBraces}), in one pass. */
function extraBraces(source: string): number[] {
  if (!source.includes("}}}")) {
    return [];
  }
  const extra: number[] = [];
  let expected: number | undefined;
  lexTokens(source, (token, lexer) => {
    expected = CLOSING_BRACES.get(token) ?? expected;
    if (token !== TOKENS.CLOSE_UNESCAPED && token !== TOKENS.CLOSE_RAW_BLOCK && token !== TOKENS.CLOSE) {
      return true;
    }
    const closed = lexer.match.length;
    if (/^}+$/.test(lexer.match) && expected !== undefined && closed > expected) {
      const end = lexer.matched.length;
      for (let at = end - (closed - expected); at < end; at += 1) {
        extra.push(at);
      }
      if (token === TOKENS.CLOSE_RAW_BLOCK) {
        lexer.popState(); // `}}}}` entered the raw-block state; after a mustache the text goes on.
      }
    }
    expected = undefined;
    return true;
  });
  return extra;
}

/** Puts the braces {@link standInForBraces} stood in for back into the template's text. */
export function restoreBraces(program: AST.Program | undefined): void {
  for (const statement of program?.body ?? []) {
    if (statement.type === "ContentStatement") {
      const content = statement as AST.ContentStatement;
      content.value = content.value.replaceAll(BRACE_STAND_IN, "}");
      // `original` is the text before whitespace control (typed wrongly as StripFlags by the parser).
      const original: unknown = content.original;
      if (typeof original === "string") {
        (content as { original: unknown }).original = original.replaceAll(BRACE_STAND_IN, "}");
      }
    }
    const block = statement as Partial<Pick<AST.BlockStatement, "program" | "inverse">>;
    restoreBraces(block.program);
    restoreBraces(block.inverse);
  }
}

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
          : hash.token === "CLOSE_UNESCAPED" || hash.token === "CLOSE_RAW_BLOCK"
            ? `unexpected ${JSON.stringify(hash.text)} (a "}" right after a mustache reads as part of it: write {{json x}} } with a space)`
            : `unexpected ${JSON.stringify(hash.text)}`;
    return `template does not parse${line === undefined ? "" : ` at line ${line}`}: ${what}${near === undefined ? "" : ` (near ${JSON.stringify(near)})`}`;
  }
  const bare = message.replace(/ - \d+:\d+$/, "");
  return typeof error.lineNumber === "number"
    ? `template does not parse at line ${error.lineNumber}: ${bare}`
    : `template does not parse: ${bare}`;
}
