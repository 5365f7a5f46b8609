/**
 * A conservative reader of bash command text, for `lib/expr/shell-template.ts`.
 *
 * The shell template renders each `{{…}}` as a mark (`NUL <n> NUL`); this
 * module walks the rendered text once, the way bash would parse it, and
 * 1. writes a variable reference in place of each mark, quoted for where the
 *    mark stands (plain, `"…"`, `'…'`, `$'…'`, or bare inside arithmetic);
 * 2. finds the marks that stand where bash **evaluates** text instead of
 *    using it as data: arithmetic (`$(( ))`, `$[ ]`, `(( ))`, `for (( ))`),
 *    array subscripts (`a[…]=`, `${a[…]}`, `([…]=…)`), substring offsets
 *    (`${v:…:…}`), the operands of `[[ … -eq/-ne/-lt/-le/-gt/-ge … ]]`,
 *    variable names (`[[ -v … ]]`, `test -v`, `${!…}`, `printf -v`, `read`,
 *    `mapfile`, `unset`, `declare`/`local`/`typeset`/`readonly`/`export`),
 *    and the arguments of `let`, `eval`, `trap`, `compgen`/`complete`, the
 *    script of `bash -c`/`sh -c`, and the values of `declare -i/-n/-a/-A`;
 * 3. follows the command's own variables: which shell variables bash
 *    evaluates in those places, and which marks (or other variables) each
 *    variable is assigned from (`x=…`, `declare x=…`, `for x in …`, `read x`
 *    from a here-string, heredoc or `echo`/`printf`, `set -- …` and the
 *    arguments of functions the command defines, as the pseudo-variable `@`).
 *
 * "Conservative" means: where the reader cannot tell, it takes the reading
 * under which bash evaluates (e.g. every subscript is arithmetic, as it is
 * for indexed arrays; `$((` is arithmetic even where bash would fall back to
 * a command substitution). It does not run or expand anything.
 */
import { EngineError } from "../errors.ts";

/** Delimits a value's mark in the rendered text: `MARK <index> MARK`. */
export const MARK = "\u0000";

/** How a reference is written where a mark stands. */
export type QuoteForm = "plain" | "double" | "single" | "ansi" | "bare";

/** Where a shell variable's value may come from. */
export interface Flow {
  /** Marks (value indexes) assigned to the variable. */
  marks: number[];
  /** Other variables it is copied from (`@`: the positional parameters; `<stdin>`: what `read` reads). */
  from: string[];
}

/** What {@link scanShellCommand} found. */
export interface ShellScan {
  /** The command text, each mark replaced by its reference. */
  command: string;
  /** Marks standing where bash evaluates them, each with the name of that context. */
  evaluated: Map<number, string>;
  /** Shell variables whose values bash evaluates somewhere in the command, each with the context. */
  evaluatedNames: Map<string, string>;
  /** What each shell variable of the command is assigned from. */
  flows: Map<string, Flow>;
}

interface Sink {
  mark(index: number): void;
  text(chunk: string): void;
}

interface Word {
  /** The word as written, quotes included; each mark written as U+0001. */
  raw: string;
  /** Written without quotes, escapes or expansions, so it may be a keyword or an option. */
  bare: boolean;
  marks: number[];
  /** The marks after the `=` of an assignment word. */
  valueMarks: number[];
  /** `NAME` of `NAME=…`, `NAME+=…` or `NAME[…]=…`. */
  assign: string | undefined;
  /** `NAME=(…)`. */
  compound: boolean;
}

interface Heredoc {
  delimiter: string;
  quoted: boolean;
  stripTabs: boolean;
}

/** One simple command being read, inside one command list. */
interface CommandState {
  words: Word[];
  redirects: { operator: string; word: Word }[];
  word: Word | undefined;
  test: boolean;
  nextRedirect: string | undefined;
  heredocs: Heredoc[];
  caseDepth: number;
  parenDepth: number;
}

const MARK_IN_WORD = "\u0001";
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ASSIGNMENT_TARGET = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[\])?\+?$/;
const RESERVED = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "!",
  "time",
  "{",
  "}",
  "coproc",
  "esac",
]);
const ARITHMETIC_TEST_OPERATORS = new Set(["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]);
const DECLARATIONS = new Set(["declare", "typeset", "local", "readonly", "export"]);
const SHELLS = new Set(["bash", "sh", "dash", "zsh", "ksh", "/bin/bash", "/bin/sh", "/usr/bin/bash"]);
/** Identifiers and references to the positional parameters in a stretch of evaluated text. */
const NAMES_IN_TEXT = /\$\{?[!#]?([0-9]+|[@*])|[A-Za-z_][A-Za-z0-9_]*/g;
/** `${#x}`, `${#a[@]}`, `${#1}`: lengths, which name a variable without evaluating its value. */
const LENGTH_EXPANSION = /\$\{#[A-Za-z0-9_@*]*(?:\[[^\]]*\])?\}/g;
/** Only what a `$` expands: `$x`, `${x…}`, `$1`, `$@`. */
const REFERENCES_IN_TEXT = /\$\{?[!#]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])/g;
/** How deeply quotes, expansions and command substitutions may nest before the text is refused. */
export const MAX_SHELL_NESTING = 200;

/** Patterns matched at the cursor (made sticky per scan, so no match copies the rest of the text). */
const AT_CURSOR = {
  dollarName: /[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]/,
  parameterName: /[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-]/,
  parameterOperator: /:[-=+?]|##?|%%?|\/[/#%]?|\^\^?|,,?|@[A-Za-z]?|[-=+?]/,
  functionParens: /\([ \t]*\)/,
  redirection: /<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>/,
} as const;

/**
 * Reads `text` (rendered, with marks) as bash would and places the references.
 * @param reference writes the reference to value `index` for a quoting form.
 * @throws EngineError `shell.unsafe_template` for a mark right after a backslash
 *   (the backslash would escape the reference's quoting) or inside a quoted heredoc
 *   (where it would never be expanded).
 */
export function scanShellCommand(text: string, reference: (index: number, form: QuoteForm) => string): ShellScan {
  const scanner = new Scanner(text, reference);
  return scanner.run();
}

class Scanner {
  readonly #text: string;
  readonly #reference: (index: number, form: QuoteForm) => string;
  #i = 0;
  #out = "";
  #depth = 0;
  readonly #evaluated = new Map<number, string>();
  readonly #names = new Map<string, string>();
  readonly #flows = new Map<string, Flow>();
  readonly #functions = new Set<string>();
  readonly #calls: { name: string; marks: number[]; from: string[] }[] = [];
  readonly #patterns = Object.fromEntries(
    Object.entries(AT_CURSOR).map(([name, pattern]) => [name, new RegExp(pattern.source, "y")]),
  ) as Record<keyof typeof AT_CURSOR, RegExp>;

  constructor(text: string, reference: (index: number, form: QuoteForm) => string) {
    this.#text = text;
    this.#reference = reference;
  }

  run(): ShellScan {
    this.#commands("");
    for (const call of this.#calls) {
      if (this.#functions.has(call.name)) {
        this.#flow("@", call.marks, call.from);
      }
    }
    return { command: this.#out, evaluated: this.#evaluated, evaluatedNames: this.#names, flows: this.#flows };
  }

  // ───────────────────────── low-level ─────────────────────────

  #at(offset = 0): string {
    return this.#text[this.#i + offset] ?? "";
  }

  /** What `pattern` matches at `offset` from the cursor, or "". */
  #match(pattern: keyof typeof AT_CURSOR, offset = 0): string {
    const sticky = this.#patterns[pattern];
    sticky.lastIndex = this.#i + offset;
    return sticky.exec(this.#text)?.[0] ?? "";
  }

  /** Runs a nested reader, refusing text nested deeper than {@link MAX_SHELL_NESTING}. */
  #nested(read: () => void): void {
    if (this.#depth >= MAX_SHELL_NESTING) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        `command_template nests quotes, expansions or substitutions more than ${MAX_SHELL_NESTING} deep`,
      );
    }
    this.#depth += 1;
    try {
      read();
    } finally {
      this.#depth -= 1;
    }
  }

  #emit(chunk: string): void {
    this.#out += chunk;
    this.#i += chunk.length;
  }

  /** Reads the mark at the cursor, writes its reference, and returns its index. */
  #mark(form: QuoteForm): number {
    const end = this.#text.indexOf(MARK, this.#i + 1);
    const index = Number(this.#text.slice(this.#i + 1, end));
    this.#out += this.#reference(index, form);
    this.#i = end + 1;
    return index;
  }

  /** A backslash: refuses one that would escape a reference, else copies it with the character it escapes. */
  #escape(sink: Sink): void {
    if (this.#at(1) === MARK) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        "a {{…}} right after a backslash in command_template: the backslash would escape the quoting of the value; remove it",
      );
    }
    const pair = this.#text.slice(this.#i, this.#i + 2);
    sink.text(pair);
    this.#emit(pair);
  }

  #evaluate(index: number, context: string): void {
    if (!this.#evaluated.has(index)) {
      this.#evaluated.set(index, context);
    }
  }

  #noteNames(text: string, context: string, pattern: RegExp = NAMES_IN_TEXT): void {
    // `${#x}` is x's length, never its value.
    const plain = text.replaceAll(MARK_IN_WORD, " ").replace(LENGTH_EXPANSION, " ");
    for (const match of plain.matchAll(pattern)) {
      const name = match[1] !== undefined && !NAME.test(match[1]) ? "@" : (match[1] ?? match[0]);
      if (!this.#names.has(name)) {
        this.#names.set(name, context);
      }
    }
  }

  #flow(name: string, marks: readonly number[], from: readonly string[]): void {
    let flow = this.#flows.get(name);
    if (flow === undefined) {
      flow = { marks: [], from: [] };
      this.#flows.set(name, flow);
    }
    flow.marks.push(...marks);
    flow.from.push(...from);
  }

  /** A sink whose marks bash evaluates; the names in its text are noted when `done()` is called. */
  #evaluatingSink(context: string): Sink & { done(): void } {
    let buffer = "";
    return {
      mark: (index) => this.#evaluate(index, context),
      text: (chunk) => {
        buffer += chunk;
      },
      done: () => this.#noteNames(buffer, context),
    };
  }

  // ───────────────────────── quoting and expansions ─────────────────────────

  #single(sink: Sink): void {
    this.#emit("'");
    sink.text("'");
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === "'") {
        sink.text("'");
        this.#emit("'");
        return;
      }
      if (ch === MARK) {
        sink.mark(this.#mark("single"));
        continue;
      }
      sink.text(ch);
      this.#emit(ch);
    }
  }

  #ansi(sink: Sink): void {
    this.#emit("$'");
    sink.text("$'");
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === "'") {
        sink.text("'");
        this.#emit("'");
        return;
      }
      if (ch === "\\") {
        this.#escape(sink);
        continue;
      }
      if (ch === MARK) {
        sink.mark(this.#mark("ansi"));
        continue;
      }
      sink.text(ch);
      this.#emit(ch);
    }
  }

  #double(sink: Sink): void {
    this.#nested(() => this.#doubleBody(sink));
  }

  #doubleBody(sink: Sink): void {
    this.#emit('"');
    sink.text('"');
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === '"') {
        sink.text('"');
        this.#emit('"');
        return;
      }
      if (ch === "\\") {
        if (this.#at(1) === MARK || '$`"\\\n'.includes(this.#at(1))) {
          this.#escape(sink);
        } else {
          sink.text(ch);
          this.#emit(ch);
        }
        continue;
      }
      this.#quotedCharacter(sink, "double");
    }
  }

  /** One character inside double quotes or an unquoted heredoc body (not `"`, not a backslash). */
  #quotedCharacter(sink: Sink, form: QuoteForm): void {
    const ch = this.#at();
    if (ch === MARK) {
      sink.mark(this.#mark(form));
    } else if (ch === "$") {
      this.#dollar(sink, "double");
    } else if (ch === "`") {
      this.#backquote();
    } else {
      sink.text(ch);
      this.#emit(ch);
    }
  }

  /** `$…` at the cursor: an expansion, a quote, or a plain dollar. */
  #dollar(sink: Sink, form: QuoteForm): void {
    const next = this.#at(1);
    if (this.#text.startsWith("$((", this.#i)) {
      this.#emit("$((");
      this.#arithmetic("))", "arithmetic $(( ))");
    } else if (next === "(") {
      this.#emit("$(");
      this.#commands(")");
    } else if (next === "{") {
      this.#parameter(sink, form);
    } else if (next === "[") {
      this.#emit("$[");
      this.#arithmetic("]", "arithmetic $[ ]");
    } else if (next === "'" && form === "plain") {
      this.#ansi(sink);
    } else if (next === '"' && form === "plain") {
      this.#emit("$");
      this.#double(sink);
    } else {
      const name = this.#match("dollarName", 1);
      sink.text(`$${name}`);
      this.#emit(`$${name}`);
    }
  }

  /** `${…}`: the name and subscript are evaluated, so are substring offsets; the word of an operator is not. */
  #parameter(sink: Sink, form: QuoteForm): void {
    this.#nested(() => this.#parameterBody(sink, form));
  }

  #parameterBody(sink: Sink, form: QuoteForm): void {
    this.#emit("${");
    sink.text("${");
    let prefix = "";
    if ((this.#at() === "!" || this.#at() === "#") && this.#at(1) !== "}") {
      prefix = this.#at();
      sink.text(prefix);
      this.#emit(prefix);
    }
    let name = "";
    if (this.#at() === MARK) {
      this.#evaluate(this.#mark("bare"), "a parameter name ${…}");
    } else {
      name = this.#match("parameterName");
      sink.text(name);
      this.#emit(name);
    }
    // `${!x}` uses x's value as a name; `${!x*}`, `${!x@}` and `${!a[@]}` list names and keys.
    if (prefix === "!" && name !== "" && !"*@[".includes(this.#at())) {
      this.#noteNames(name, "an indirection ${!…}");
    }
    if (this.#at() === "[") {
      this.#emit("[");
      sink.text("[]");
      this.#arithmetic("]", "an array subscript ${name[…]}");
    }
    const op = this.#at();
    if (op === "}") {
      sink.text("}");
      this.#emit("}");
      return;
    }
    if (op === ":" && !"-=+?".includes(this.#at(1))) {
      this.#emit(":");
      this.#arithmetic("}", "a substring offset or length ${var:…}");
      sink.text("}");
      return;
    }
    if (op === "@" && this.#at(1) === "P" && name !== "") {
      this.#noteNames(name, "a prompt expansion ${…@P}");
    }
    const operator = this.#match("parameterOperator");
    sink.text(operator);
    this.#emit(operator);
    this.#parameterWord(sink, form === "double" ? "double" : form === "bare" ? "bare" : "plain");
  }

  /** The word of `${x:-word}`, `${x/pattern/word}`…, up to the closing brace. */
  #parameterWord(sink: Sink, form: QuoteForm): void {
    this.#nested(() => this.#parameterWordBody(sink, form));
  }

  #parameterWordBody(sink: Sink, form: QuoteForm): void {
    let depth = 0;
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === "}" && depth === 0) {
        sink.text("}");
        this.#emit("}");
        return;
      }
      if (ch === "{" || ch === "}") {
        depth += ch === "{" ? 1 : -1;
        sink.text(ch);
        this.#emit(ch);
      } else if (ch === "\\") {
        this.#escape(sink);
      } else if (ch === "'" && form !== "double") {
        this.#single(sink);
      } else if (ch === '"') {
        this.#double(sink);
      } else if (ch === MARK) {
        sink.mark(this.#mark(form));
      } else if (ch === "$") {
        this.#dollar(sink, form === "double" ? "double" : "plain");
      } else if (ch === "`") {
        this.#backquote();
      } else {
        sink.text(ch);
        this.#emit(ch);
      }
    }
  }

  /**
   * Text bash evaluates as arithmetic, up to `closer`: every mark in it is
   * evaluated, and so is every variable it names.
   */
  #arithmetic(closer: "))" | "]" | "}", context: string): void {
    this.#nested(() => this.#arithmeticBody(closer, context));
  }

  #arithmeticBody(closer: "))" | "]" | "}", context: string): void {
    const sink = this.#evaluatingSink(context);
    let parens = 0;
    let brackets = 0;
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (closer === "))" && parens === 0 && this.#text.startsWith("))", this.#i)) {
        this.#emit("))");
        break;
      }
      if ((closer === "]" && ch === "]" && brackets === 0) || (closer === "}" && ch === "}")) {
        this.#emit(ch);
        break;
      }
      if (ch === MARK) {
        sink.mark(this.#mark("bare"));
      } else if (ch === "$") {
        this.#dollar(sink, "bare");
      } else if (ch === "`") {
        this.#backquote();
      } else if (ch === '"') {
        this.#double(sink);
      } else if (ch === "'") {
        this.#single(sink);
      } else if (ch === "\\") {
        this.#escape(sink);
      } else {
        parens += ch === "(" ? 1 : ch === ")" ? -1 : 0;
        brackets += ch === "[" ? 1 : ch === "]" ? -1 : 0;
        sink.text(ch);
        this.#emit(ch);
      }
    }
    sink.done();
  }

  #backquote(): void {
    this.#emit("`");
    this.#commands("`");
  }

  // ───────────────────────── commands ─────────────────────────

  /** A command list, up to `closer` (`)` of `$(`, a backquote, or the end of the text). */
  #commands(closer: "" | ")" | "`"): void {
    this.#nested(() => this.#commandsBody(closer));
  }

  #commandsBody(closer: "" | ")" | "`"): void {
    const state: CommandState = {
      words: [],
      redirects: [],
      word: undefined,
      test: false,
      nextRedirect: undefined,
      heredocs: [],
      caseDepth: 0,
      parenDepth: 0,
    };
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (
        (closer === "`" && ch === "`") ||
        (closer === ")" && ch === ")" && state.parenDepth === 0 && state.caseDepth === 0 && !state.test)
      ) {
        this.#endCommand(state);
        this.#emit(ch);
        return;
      }
      this.#commandCharacter(state, ch);
    }
    this.#endCommand(state);
  }

  #word(state: CommandState): Word {
    state.word ??= { raw: "", bare: true, marks: [], valueMarks: [], assign: undefined, compound: false };
    return state.word;
  }

  #wordSink(word: Word): Sink {
    return {
      mark: (index) => {
        word.marks.push(index);
        if (word.assign !== undefined) {
          word.valueMarks.push(index);
        }
        word.raw += MARK_IN_WORD;
      },
      text: (chunk) => {
        word.raw += chunk;
      },
    };
  }

  #commandCharacter(state: CommandState, ch: string): void {
    const next = this.#at(1);
    if (ch === MARK || ch === "\\" || ch === "'" || ch === '"' || ch === "$" || ch === "`") {
      const word = this.#word(state);
      const sink = this.#wordSink(word);
      if (ch === MARK) {
        sink.mark(this.#mark("plain"));
        word.bare = false;
      } else if (ch === "\\" && next === "\n") {
        this.#emit("\\\n");
      } else {
        word.bare = false;
        this.#quoted(sink, ch);
      }
      return;
    }
    if (ch === "#" && state.word === undefined && !state.test) {
      this.#comment();
    } else if (ch === " " || ch === "\t") {
      this.#endWord(state);
      this.#emit(ch);
    } else if (ch === "\n") {
      this.#endWord(state);
      this.#emit(ch);
      if (!state.test) {
        this.#endCommand(state);
        this.#heredocBodies(state);
      }
    } else if (ch === ";" || ch === "&" || ch === "|") {
      this.#separator(state, ch, next);
    } else if (ch === "(") {
      this.#openParen(state, next);
    } else if (ch === ")") {
      this.#endWord(state);
      if (state.test) {
        state.words.push(this.#token(ch));
      } else {
        this.#endCommand(state);
        state.parenDepth = Math.max(0, state.parenDepth - 1);
      }
      this.#emit(ch);
    } else if (ch === "<" || ch === ">") {
      this.#redirection(state, ch, next);
    } else if (ch === "[" && state.word !== undefined && state.word.bare && NAME.test(state.word.raw)) {
      state.word.raw += "[]";
      state.word.bare = false;
      this.#emit("[");
      this.#arithmetic("]", "an array subscript name[…]");
    } else if (
      ch === "=" &&
      state.word !== undefined &&
      state.word.assign === undefined &&
      ASSIGNMENT_TARGET.test(state.word.raw)
    ) {
      state.word.assign = ASSIGNMENT_TARGET.exec(state.word.raw)?.[1];
      state.word.raw += "=";
      this.#emit("=");
    } else {
      this.#word(state).raw += ch;
      this.#emit(ch);
    }
  }

  /** A quote, an expansion or a backslash inside a word. */
  #quoted(sink: Sink, ch: string): void {
    if (ch === "\\") {
      this.#escape(sink);
    } else if (ch === "'") {
      this.#single(sink);
    } else if (ch === '"') {
      this.#double(sink);
    } else if (ch === "$") {
      this.#dollar(sink, "plain");
    } else {
      this.#backquote();
    }
  }

  #token(raw: string): Word {
    return { raw, bare: true, marks: [], valueMarks: [], assign: undefined, compound: false };
  }

  #separator(state: CommandState, ch: string, next: string): void {
    this.#endWord(state);
    if (state.test && (ch === "&" || ch === "|") && next === ch) {
      state.words.push(this.#token(ch + ch));
      this.#emit(ch + ch);
      return;
    }
    if (ch === "&" && next === ">") {
      this.#redirection(state, ch, next);
      return;
    }
    this.#endCommand(state);
    this.#emit(ch);
  }

  #openParen(state: CommandState, next: string): void {
    const word = state.word;
    if (word === undefined && next === "(" && !state.test) {
      this.#emit("((");
      this.#arithmetic("))", "arithmetic (( ))");
      return;
    }
    if (word !== undefined && word.assign !== undefined && word.raw.endsWith("=")) {
      this.#compound(word);
      return;
    }
    this.#endWord(state);
    if (state.test) {
      state.words.push(this.#token("("));
      this.#emit("(");
      return;
    }
    const definition = this.#match("functionParens");
    const named = state.words.filter(
      (candidate) => !(candidate.bare && (candidate.raw === "function" || RESERVED.has(candidate.raw))),
    );
    if (definition !== "" && named.length === 1 && named[0] !== undefined && named[0].bare) {
      this.#functions.add(named[0].raw);
      state.words = [];
      this.#emit(definition);
      return;
    }
    this.#endCommand(state);
    state.parenDepth += 1;
    this.#emit("(");
  }

  #redirection(state: CommandState, ch: string, next: string): void {
    this.#endWord(state);
    if (state.test) {
      state.words.push(this.#token(ch));
      this.#emit(ch);
      return;
    }
    if (next === "(") {
      // Process substitution: a word whose commands are read like `$(…)`.
      this.#word(state).bare = false;
      this.#emit(`${ch}(`);
      this.#commands(")");
      return;
    }
    const operator = this.#match("redirection") || ch;
    this.#emit(operator);
    state.nextRedirect = operator;
  }

  /** `NAME=(…)`: elements are data, but an element's `[…]=` subscript is evaluated. */
  #compound(word: Word): void {
    this.#nested(() => this.#compoundBody(word));
  }

  #compoundBody(word: Word): void {
    word.compound = true;
    word.raw += "(";
    this.#emit("(");
    const sink = this.#wordSink(word);
    let elementStart = true;
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === ")") {
        word.raw += ")";
        this.#emit(")");
        return;
      }
      if (ch === " " || ch === "\t" || ch === "\n") {
        this.#emit(ch);
        elementStart = true;
        continue;
      }
      if (ch === "[" && elementStart) {
        this.#emit("[");
        this.#arithmetic("]", "an array subscript ([…]=…)");
      } else if (ch === "#" && elementStart) {
        this.#comment();
      } else if (ch === MARK) {
        sink.mark(this.#mark("plain"));
      } else if (ch === "\\" || ch === "'" || ch === '"' || ch === "$" || ch === "`") {
        this.#quoted(sink, ch);
      } else {
        sink.text(ch);
        this.#emit(ch);
      }
      elementStart = false;
    }
  }

  #comment(): void {
    while (this.#i < this.#text.length && this.#at() !== "\n") {
      if (this.#at() === MARK) {
        this.#mark("plain");
      } else {
        this.#emit(this.#at());
      }
    }
  }

  #heredocBodies(state: CommandState): void {
    for (const heredoc of state.heredocs) {
      this.#heredocBody(heredoc);
    }
    state.heredocs = [];
  }

  /** A heredoc's lines up to its delimiter: unquoted, they expand like `"…"` (without the quotes) and feed `read`. */
  #heredocBody(heredoc: Heredoc): void {
    const stdin: Sink = { mark: (index) => this.#flow("<stdin>", [index], []), text: () => {} };
    while (this.#i < this.#text.length) {
      const end = this.#text.indexOf("\n", this.#i);
      const line = this.#text.slice(this.#i, end === -1 ? this.#text.length : end);
      if ((heredoc.stripTabs ? line.replace(/^\t+/, "") : line) === heredoc.delimiter) {
        this.#emit(end === -1 ? line : `${line}\n`);
        return;
      }
      if (heredoc.quoted) {
        if (line.includes(MARK)) {
          throw EngineError.terminal(
            "shell.unsafe_template",
            `a {{…}} inside a quoted heredoc (<<'${heredoc.delimiter}') is never expanded; quote nothing in the delimiter (<<${heredoc.delimiter}) to pass the value`,
          );
        }
        this.#emit(end === -1 ? line : `${line}\n`);
        continue;
      }
      this.#heredocLine(stdin);
    }
  }

  #heredocLine(sink: Sink): void {
    while (this.#i < this.#text.length) {
      const ch = this.#at();
      if (ch === "\n") {
        this.#emit(ch);
        return;
      }
      if (ch === "\\") {
        if (this.#at(1) === MARK || "$`\\\n".includes(this.#at(1))) {
          this.#escape(sink);
        } else {
          this.#emit(ch);
        }
        continue;
      }
      this.#quotedCharacter(sink, "double");
    }
  }

  // ───────────────────────── words and simple commands ─────────────────────────

  #endWord(state: CommandState): void {
    const word = state.word;
    if (word === undefined) {
      return;
    }
    state.word = undefined;
    if (state.nextRedirect !== undefined) {
      const operator = state.nextRedirect;
      state.nextRedirect = undefined;
      state.redirects.push({ operator, word });
      if (operator === "<<" || operator === "<<-") {
        state.heredocs.push({
          delimiter: word.raw.replace(/['"\\]/g, ""),
          quoted: /['"\\]/.test(word.raw),
          stripTabs: operator === "<<-",
        });
      }
      return;
    }
    if (state.test) {
      if (word.bare && word.raw === "]]") {
        this.#analyzeTest(state.words);
        state.words = [];
        state.test = false;
        return;
      }
      state.words.push(word);
      return;
    }
    if (word.bare && isCommandPosition(state.words)) {
      if (word.raw === "[[") {
        state.test = true;
        state.words = [];
        return;
      }
      if (word.raw === "case") {
        state.caseDepth += 1;
      } else if (word.raw === "esac") {
        state.caseDepth = Math.max(0, state.caseDepth - 1);
      }
    }
    state.words.push(word);
  }

  #endCommand(state: CommandState): void {
    this.#endWord(state);
    if (!state.test) {
      this.#analyze(state.words, state.redirects);
    }
    state.words = [];
    state.redirects = [];
    state.nextRedirect = undefined;
    state.test = false;
  }

  /** One simple command: what its command word makes of its arguments. */
  #analyze(words: Word[], redirects: { operator: string; word: Word }[]): void {
    let k = 0;
    for (; k < words.length; k += 1) {
      const word = words[k];
      if (word === undefined || !word.bare) {
        break;
      }
      if (word.raw === "for" || word.raw === "select") {
        this.#forLoop(words.slice(k + 1));
        return;
      }
      if (word.raw === "function") {
        const name = words[k + 1];
        if (name !== undefined) {
          this.#functions.add(name.raw);
        }
        k += 1;
        continue;
      }
      if (!RESERVED.has(word.raw)) {
        break;
      }
    }
    for (; k < words.length && words[k]?.assign !== undefined; k += 1) {
      const word = words[k];
      if (word?.assign !== undefined) {
        this.#flow(word.assign, word.valueMarks, references(valueOf(word)));
      }
    }
    const command = words[k];
    if (command === undefined || !command.bare) {
      return;
    }
    const args = words.slice(k + 1);
    if (command.raw === "command" || command.raw === "builtin") {
      this.#analyze(
        args.filter((arg) => !(arg.bare && arg.raw.startsWith("-"))),
        redirects,
      );
      return;
    }
    this.#builtin(command.raw, args, redirects);
  }

  #builtin(name: string, args: Word[], redirects: { operator: string; word: Word }[]): void {
    const evaluateAll = (context: string, names: "all" | "references" | "unquoted references") => {
      for (const arg of args) {
        arg.marks.forEach((index) => this.#evaluate(index, context));
        const text = names === "unquoted references" ? withoutSingleQuoted(arg.raw) : arg.raw;
        this.#noteNames(text, context, names === "all" ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
      }
    };
    switch (name) {
      case "let":
        return evaluateAll("let", "all");
      case "eval":
      case "trap":
        return evaluateAll(name, "unquoted references");
      case "unset":
      case "compgen":
      case "complete":
      case "mapfile":
      case "readarray":
        return evaluateAll(`a variable name or code (${name})`, "references");
      case "read":
        this.#read(args, redirects);
        return evaluateAll("a variable name (read)", "references");
      case "printf":
        this.#afterOption(args, "-v", "a variable name (printf -v)");
        this.#flow(
          "<stdin>",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      case "echo":
        this.#flow(
          "<stdin>",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      case "test":
      case "[":
        return this.#afterOption(args, "-v", "a variable name (test -v)");
      case "set":
        this.#flow(
          "@",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      default:
        if (DECLARATIONS.has(name)) {
          return this.#declaration(name, args);
        }
        if (SHELLS.has(name)) {
          return this.#shellScript(name, args);
        }
        this.#calls.push({
          name,
          marks: args.flatMap((arg) => arg.marks),
          from: args.flatMap((arg) => references(arg.raw)),
        });
    }
  }

  /** Marks and references in the argument after `option` are evaluated (a variable name follows `-v`). */
  #afterOption(args: Word[], option: string, context: string): void {
    args.forEach((arg, index) => {
      const value = args[index + 1];
      if (arg.bare && arg.raw === option && value !== undefined) {
        value.marks.forEach((mark) => this.#evaluate(mark, context));
        this.#noteNames(value.raw, context, REFERENCES_IN_TEXT);
      }
    });
  }

  /** `read x y` takes what its standard input carries: here-strings, heredocs, and what `echo`/`printf` print. */
  #read(args: Word[], redirects: { operator: string; word: Word }[]): void {
    for (const { operator, word } of redirects) {
      if (operator === "<<<") {
        this.#flow("<stdin>", word.marks, references(word.raw));
      }
    }
    for (const arg of args) {
      if (arg.bare && NAME.test(arg.raw)) {
        this.#flow(arg.raw, [], ["<stdin>"]);
      }
    }
  }

  #forLoop(rest: Word[]): void {
    const variable = rest[0];
    if (variable === undefined) {
      return;
    }
    const inAt = rest.findIndex((word) => word.bare && word.raw === "in");
    if (inAt === -1) {
      this.#flow(variable.raw, [], ["@"]);
      return;
    }
    const items = rest.slice(inAt + 1);
    this.#flow(
      variable.raw,
      items.flatMap((word) => word.marks),
      items.flatMap((word) => references(word.raw)),
    );
  }

  /**
   * `declare`, `local`, `typeset`, `readonly`, `export`: a name is evaluated
   * (a subscript in it is arithmetic); so is a value with `-i` (arithmetic),
   * `-n` (a name), or `-a`/`-A` without parentheses (bash parses a quoted
   * `(…)` value as a compound assignment).
   */
  #declaration(name: string, args: Word[]): void {
    const flags = args
      .filter((arg) => arg.bare && /^[-+][A-Za-z]+$/.test(arg.raw))
      .map((arg) => arg.raw.slice(1))
      .join("");
    const context = `a variable name or value (${name}${flags === "" ? "" : ` -${flags}`})`;
    for (const arg of args) {
      if (arg.bare && /^[-+][A-Za-z]+$/.test(arg.raw)) {
        continue;
      }
      const valueMarks = new Set(arg.valueMarks);
      arg.marks.filter((index) => !valueMarks.has(index)).forEach((index) => this.#evaluate(index, context));
      const target = arg.assign ?? (NAME.test(arg.raw) ? arg.raw : undefined);
      if (arg.assign === undefined) {
        this.#noteNames(arg.raw, context, REFERENCES_IN_TEXT);
      } else {
        this.#flow(arg.assign, arg.valueMarks, references(valueOf(arg)));
      }
      if (/[in]/.test(flags) || (/[aA]/.test(flags) && !arg.compound)) {
        arg.valueMarks.forEach((index) => this.#evaluate(index, context));
        this.#noteNames(valueOf(arg), context, /i/.test(flags) ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
      }
      if (/i/.test(flags) && target !== undefined) {
        this.#noteNames(target, context);
      }
    }
  }

  /** `bash -c SCRIPT …`: the script is code. */
  #shellScript(name: string, args: Word[]): void {
    const at = args.findIndex((arg) => arg.bare && /^-[A-Za-z]*c[A-Za-z]*$/.test(arg.raw));
    const script = at === -1 ? undefined : args[at + 1];
    if (script !== undefined) {
      const context = `the script of ${name} -c`;
      script.marks.forEach((index) => this.#evaluate(index, context));
      this.#noteNames(withoutSingleQuoted(script.raw), context, REFERENCES_IN_TEXT);
    }
  }

  /** `[[ … ]]`: an operand of an arithmetic comparison is evaluated as arithmetic; the word after `-v` is a name. */
  #analyzeTest(tokens: Word[]): void {
    tokens.forEach((token, index) => {
      const before = tokens[index - 1];
      const after = tokens[index + 1];
      const isOperator = (word: Word | undefined) =>
        word !== undefined && word.bare && ARITHMETIC_TEST_OPERATORS.has(word.raw);
      if (isOperator(before) || isOperator(after)) {
        const context = "an operand of [[ … -eq/-ne/-lt/-le/-gt/-ge … ]]";
        token.marks.forEach((mark) => this.#evaluate(mark, context));
        this.#noteNames(token.raw, context);
      } else if (before !== undefined && before.bare && before.raw === "-v") {
        const context = "a variable name ([[ -v … ]])";
        token.marks.forEach((mark) => this.#evaluate(mark, context));
        this.#noteNames(token.raw, context, REFERENCES_IN_TEXT);
      }
    });
  }
}

/** Before the command word: only reserved words and assignments so far. */
function isCommandPosition(words: readonly Word[]): boolean {
  return words.every((word) => (word.bare && RESERVED.has(word.raw)) || word.assign !== undefined);
}

/** The part of an assignment word after its `=`. */
function valueOf(word: Word): string {
  const at = word.raw.indexOf("=");
  return at === -1 ? word.raw : word.raw.slice(at + 1);
}

/** The variables a word expands (`$x`, `${x…}`; `@` for the positional parameters). */
function references(text: string): string[] {
  return [...text.matchAll(REFERENCES_IN_TEXT)].map((match) => {
    const name = match[1] ?? "";
    return NAME.test(name) ? name : "@";
  });
}

/** The text without its single-quoted parts (outside double quotes), which no expansion reaches. */
function withoutSingleQuoted(text: string): string {
  let out = "";
  let quote: "" | "'" | '"' = "";
  for (const ch of text) {
    if (quote === "'") {
      quote = ch === "'" ? "" : quote;
      continue;
    }
    if (ch === "'" && quote === "") {
      quote = "'";
      continue;
    }
    if (ch === '"') {
      quote = quote === '"' ? "" : '"';
    }
    out += ch;
  }
  return out;
}
