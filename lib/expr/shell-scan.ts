/**
 * A conservative reader of bash command text, for `lib/expr/shell-template.ts`. It walks the
 * rendered text (each `{{…}}` a mark, `NUL <n> NUL`) once, the way bash parses it, writes each
 * mark's reference quoted for where it stands, and finds the marks and the command's own
 * variables that reach places where bash evaluates text (listed in docs/containers.md).
 * Where it cannot tell, it takes the reading under which bash evaluates (every subscript is
 * arithmetic, `$((` is always arithmetic). It runs and expands nothing.
 *
 * Why not a parser library: `sh-syntax` (mvdan/sh as wasm) returns a command as its position
 * only, asynchronously, starting a Go runtime per parse; `tree-sitter-bash` reads
 * `$(( … ))` in a heredoc as a command substitution and `([2]=v)` as plain words, both places
 * where bash evaluates.
 */
import { EngineError } from "../errors.ts";

/** Delimits a value's mark in the rendered text: `MARK <index> MARK`. */
export const MARK = "\u0000";
/** How deeply quotes, expansions and command substitutions may nest before the text is refused. */
export const MAX_SHELL_NESTING = 200;

/** How a reference is written where a mark stands. */
export type QuoteForm = "plain" | "double" | "single" | "ansi" | "bare";
/** The forms in which `$…` expands: unquoted, in `"…"`, in arithmetic. */
type ExpandForm = "plain" | "double" | "bare";

/** Where a shell variable's value may come from. */
interface Flow {
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

/** Where the text and marks of a stretch being read go (a word, evaluated text, `read`'s input). */
interface Sink {
  mark(index: number): void;
  text(chunk: string): void;
}

interface Word {
  /** The word as written, quotes included; each mark written as {@link MARK_IN_WORD}. */
  raw: string;
  /** Written without quotes, escapes or expansions, so it may be a keyword or an option. */
  bare: boolean;
  /** Every mark of an assignment word stands after its `=` (a name before it has none). */
  marks: number[];
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
  /** The words of `<<<` (what `read` reads). */
  hereStrings: Word[];
  word?: Word | undefined;
  /** Inside `[[ … ]]`. */
  test?: boolean;
  nextRedirect?: string | undefined;
  heredocs: Heredoc[];
  caseDepth: number;
  parenDepth: number;
}

/** Which names in an argument's text bash evaluates: any name, references (`$x`), or references outside single quotes. */
type NamesIn = "all" | "references" | "unquoted references";

const MARK_IN_WORD = "\u0001";
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ASSIGNMENT_TARGET = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[\])?\+?$/;
const FLAG = /^[-+][A-Za-z]+$/;
const RESERVED = new Set("if then else elif fi do done while until ! time { } coproc esac".split(" "));
const ARITHMETIC_TEST_OPERATORS = new Set(["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]);
const DECLARATIONS = new Set(["declare", "typeset", "local", "readonly", "export"]);
const SHELLS = new Set(["bash", "sh", "dash", "zsh", "ksh", "/bin/bash", "/bin/sh", "/usr/bin/bash"]);
/** Identifiers and references to the positional parameters in a stretch of evaluated text. */
const NAMES_IN_TEXT = /\$\{?[!#]?([0-9]+|[@*])|[A-Za-z_][A-Za-z0-9_]*/g;
/** `${#x}`, `${#a[@]}`, `${#1}`: lengths, which name a variable without evaluating its value. */
const LENGTH_EXPANSION = /\$\{#[A-Za-z0-9_@*]*(?:\[[^\]]*\])?\}/g;
/** Only what a `$` expands: `$x`, `${x…}`, `$1`, `$@`. */
const REFERENCES_IN_TEXT = /\$\{?[!#]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])/g;

/** Patterns matched at the cursor (made sticky per scan, so no match copies the rest of the text). */
const AT_CURSOR = {
  dollarName: /[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]/,
  parameterName: /[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-]/,
  parameterOperator: /:[-=+?]|##?|%%?|\/[/#%]?|\^\^?|,,?|@[A-Za-z]?|[-=+?]/,
  functionParens: /\([ \t]*\)/,
  redirection: /<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>/,
  /** An operator of `[[ … ]]` (`&` only as the start of `&>`). */
  testOperator: /&&|\|\||&(?=>)|[()<>]/,
} as const;

/**
 * Reads `text` (rendered, with marks) as bash would and places the references.
 * @param reference writes the reference to value `index` for a quoting form.
 * @throws EngineError `shell.unsafe_template` for a mark right after a backslash
 *   (the backslash would escape the reference's quoting) or inside a quoted heredoc
 *   (where it would never be expanded), or for text nested deeper than {@link MAX_SHELL_NESTING}.
 */
export function scanShellCommand(text: string, reference: (index: number, form: QuoteForm) => string): ShellScan {
  return new ShellReader(text, reference).run();
}

/** One reading of one command: the cursor, the output, and what was found. */
class ShellReader {
  private readonly text: string;
  private readonly reference: (index: number, form: QuoteForm) => string;
  private i = 0;
  private out = "";
  private depth = 0;
  private readonly evaluated = new Map<number, string>();
  private readonly names = new Map<string, string>();
  private readonly flows = new Map<string, Flow>();
  /** Functions the command defines, and every call of a command with its arguments. */
  private readonly functions = new Set<string>();
  private readonly calls: { name: string; args: Word[] }[] = [];
  private readonly patterns = Object.fromEntries(
    Object.entries(AT_CURSOR).map(([name, pattern]) => [name, new RegExp(pattern.source, "y")]),
  ) as Record<keyof typeof AT_CURSOR, RegExp>;

  constructor(text: string, reference: (index: number, form: QuoteForm) => string) {
    this.text = text;
    this.reference = reference;
  }

  run(): ShellScan {
    this.commands("", "");
    for (const call of this.calls.filter(({ name }) => this.functions.has(name))) {
      this.flowFrom("@", call.args);
    }
    return { command: this.out, evaluated: this.evaluated, evaluatedNames: this.names, flows: this.flows };
  }

  // ───────────────────────── cursor and output ─────────────────────────

  private at(offset = 0): string {
    return this.text[this.i + offset] ?? "";
  }

  /** What `pattern` matches at `offset` from the cursor, or "". */
  private match(pattern: keyof typeof AT_CURSOR, offset = 0): string {
    const sticky = this.patterns[pattern];
    sticky.lastIndex = this.i + offset;
    return sticky.exec(this.text)?.[0] ?? "";
  }

  /** Runs a nested reader, refusing text nested deeper than {@link MAX_SHELL_NESTING}. */
  private nested(read: () => void): void {
    if (this.depth >= MAX_SHELL_NESTING) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        `command_template nests quotes, expansions or substitutions more than ${MAX_SHELL_NESTING} deep`,
      );
    }
    this.depth += 1;
    read();
    // A throw ends the whole reading, so the depth needs no `finally`.
    this.depth -= 1;
  }

  private emit(chunk: string): void {
    this.out += chunk;
    this.i += chunk.length;
  }

  /** Copies `chunk` (the text at the cursor) to the output and to `sink`. */
  private copy(sink: Sink, chunk: string): void {
    sink.text(chunk);
    this.emit(chunk);
  }

  /** Reads the mark at the cursor, writes its reference, and returns its index. */
  private mark(form: QuoteForm): number {
    const end = this.text.indexOf(MARK, this.i + 1);
    const index = Number(this.text.slice(this.i + 1, end));
    this.out += this.reference(index, form);
    this.i = end + 1;
    return index;
  }

  /** A backslash: refuses one that would escape a reference, else copies it with the character it escapes. */
  private escape(sink: Sink): void {
    if (this.at(1) === MARK) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        "a {{…}} right after a backslash in command_template: the backslash would escape the quoting of the value; remove it",
      );
    }
    this.copy(sink, this.text.slice(this.i, this.i + 2));
  }

  /** Calls `step` at each character up to the end of the text or the one that `closes` (left at the cursor). */
  private readUntil(closes: string | ((ch: string) => boolean), step: (ch: string) => void): void {
    const isCloser = typeof closes === "string" ? (ch: string) => ch === closes : closes;
    for (let ch = this.at(); ch !== "" && !isCloser(ch); ch = this.at()) {
      step(ch);
    }
  }

  // ───────────────────────── what was found ─────────────────────────

  private evaluate(index: number, context: string): void {
    this.evaluated.set(index, this.evaluated.get(index) ?? context);
  }

  private noteNames(text: string, context: string, pattern: RegExp = NAMES_IN_TEXT): void {
    // `${#x}` is x's length, never its value.
    const plain = text.replaceAll(MARK_IN_WORD, " ").replace(LENGTH_EXPANSION, " ");
    for (const name of references(plain, pattern)) {
      this.names.set(name, this.names.get(name) ?? context);
    }
  }

  /** Bash evaluates `marks` and the names `pattern` finds in `text`, in `context`. */
  private evaluateText(marks: readonly number[], text: string, context: string, pattern = REFERENCES_IN_TEXT): void {
    marks.forEach((index) => this.evaluate(index, context));
    this.noteNames(text, context, pattern);
  }

  private flow(name: string, marks: readonly number[], from: readonly string[]): void {
    const flow = this.flows.get(name) ?? { marks: [], from: [] };
    this.flows.set(name, flow);
    flow.marks.push(...marks);
    flow.from.push(...from);
  }

  /** `name` takes the marks of `words` and the variables they expand. */
  private flowFrom(name: string, words: readonly Word[]): void {
    const marks = words.flatMap((word) => word.marks);
    const from = words.flatMap((word) => references(word.raw));
    this.flow(name, marks, from);
  }

  /** A sink whose marks bash evaluates; the names in its text are noted when `done()` is called. */
  private evaluatingSink(context: string): Sink & { done(): void } {
    let buffer = "";
    return {
      mark: (index) => this.evaluate(index, context),
      text: (chunk) => {
        buffer += chunk;
      },
      done: () => this.noteNames(buffer, context),
    };
  }

  // ───────────────────────── quoting and expansions ─────────────────────────

  /**
   * A mark, backslash, quote (`'` is plain inside `"…"`), `$…` or backquote at the cursor,
   * read in `form` (`$…` in `dollarForm`); false when the cursor is on none of them.
   */
  private expansion(sink: Sink, form: ExpandForm, dollarForm: ExpandForm = form): boolean {
    const ch = this.at();
    if (ch === MARK) {
      sink.mark(this.mark(form));
    } else if (ch === "\\") {
      this.escape(sink);
    } else if (ch === "'" && form !== "double") {
      this.singleQuoted(sink, "single");
    } else if (ch === '"') {
      this.double(sink);
    } else if (ch === "$") {
      this.dollar(sink, dollarForm);
    } else if (ch === "`") {
      this.commands("`", "`");
    } else {
      return false;
    }
    return true;
  }

  /** `'…'` or `$'…'` (where a backslash escapes): nothing expands, a mark steps out of the quotes. */
  private singleQuoted(sink: Sink, form: "single" | "ansi"): void {
    this.copy(sink, form === "ansi" ? "$'" : "'");
    this.readUntil("'", (ch) => {
      if (ch === "\\" && form === "ansi") {
        this.escape(sink);
      } else if (ch === MARK) {
        sink.mark(this.mark(form));
      } else {
        this.copy(sink, ch);
      }
    });
    this.copy(sink, this.at());
  }

  private double(sink: Sink): void {
    this.nested(() => {
      this.copy(sink, '"');
      this.expandingText(sink, '"');
    });
  }

  /** The inside of `"…"`, or one line of an unquoted heredoc: up to and with `end`, expanded as in double quotes. */
  private expandingText(sink: Sink, end: '"' | "\n"): void {
    this.readUntil(end, (ch) => {
      if (ch === "\\") {
        this.escape(sink);
      } else if (ch === MARK) {
        sink.mark(this.mark("double"));
      } else if (ch === "$") {
        this.dollar(sink, "double");
      } else if (ch === "`") {
        this.commands("`", "`");
      } else {
        this.copy(sink, ch);
      }
    });
    this.copy(sink, this.at());
  }

  /** `$…` at the cursor: an expansion, a quote, or a plain dollar. */
  private dollar(sink: Sink, form: ExpandForm): void {
    const next = this.at(1);
    if (this.text.startsWith("$((", this.i)) {
      this.arithmetic("$((", "))", "arithmetic $(( ))");
    } else if (next === "(") {
      this.commands("$(", ")");
    } else if (next === "{") {
      this.parameter(sink, form);
    } else if (next === "[") {
      this.arithmetic("$[", "]", "arithmetic $[ ]");
    } else if (next === "'" && form === "plain") {
      this.singleQuoted(sink, "ansi");
    } else if (next === '"' && form === "plain") {
      this.emit("$");
      this.double(sink);
    } else {
      this.copy(sink, `$${this.match("dollarName", 1)}`);
    }
  }

  /** `${…}`: the name and subscript are evaluated, so are substring offsets; the word of an operator is not. */
  private parameter(sink: Sink, form: ExpandForm): void {
    this.nested(() => {
      this.copy(sink, "${");
      const prefix = "!#".includes(this.at()) && this.at(1) !== "}" ? this.at() : "";
      this.copy(sink, prefix);
      let name = "";
      if (this.at() === MARK) {
        this.evaluate(this.mark("bare"), "a parameter name ${…}");
      } else {
        name = this.match("parameterName");
        this.copy(sink, name);
      }
      // `${!x}` uses x's value as a name; `${!x*}`, `${!x@}` and `${!a[@]}` list names and keys.
      if (prefix === "!" && name !== "" && !"*@[".includes(this.at())) {
        this.noteNames(name, "an indirection ${!…}");
      }
      if (this.at() === "[") {
        sink.text("[]");
        this.arithmetic("[", "]", "an array subscript ${name[…]}");
      }
      const op = this.at();
      if (op === "}") {
        this.copy(sink, op);
        return;
      }
      if (op === ":" && !"-=+?".includes(this.at(1))) {
        this.arithmetic(":", "}", "a substring offset or length ${var:…}");
        sink.text("}");
        return;
      }
      if (op === "@" && this.at(1) === "P" && name !== "") {
        this.noteNames(name, "a prompt expansion ${…@P}");
      }
      this.copy(sink, this.match("parameterOperator"));
      this.parameterWord(sink, form);
    });
  }

  /** The word of `${x:-word}`, `${x/pattern/word}`…, up to the closing brace. */
  private parameterWord(sink: Sink, form: ExpandForm): void {
    this.nested(() => {
      let depth = 0;
      this.readUntil(
        (ch) => ch === "}" && depth === 0,
        (ch) => {
          if (ch === "{" || ch === "}") {
            depth += ch === "{" ? 1 : -1;
            this.copy(sink, ch);
          } else if (!this.expansion(sink, form, form === "double" ? "double" : "plain")) {
            this.copy(sink, ch);
          }
        },
      );
      this.copy(sink, this.at());
    });
  }

  /**
   * Text bash evaluates as arithmetic, up to `closer`: every mark in it is
   * evaluated, and so is every variable it names.
   */
  private arithmetic(opener: string, closer: "))" | "]" | "}", context: string): void {
    this.emit(opener);
    this.nested(() => {
      const sink = this.evaluatingSink(context);
      let parens = 0;
      let brackets = 0;
      this.readUntil(
        (ch) =>
          closer === "))"
            ? parens === 0 && this.text.startsWith("))", this.i)
            : ch === closer && (closer === "}" || brackets === 0),
        (ch) => {
          if (!this.expansion(sink, "bare")) {
            parens += ch === "(" ? 1 : ch === ")" ? -1 : 0;
            brackets += ch === "[" ? 1 : ch === "]" ? -1 : 0;
            this.copy(sink, ch);
          }
        },
      );
      this.emit(this.text.slice(this.i, this.i + closer.length));
      sink.done();
    });
  }

  // ───────────────────────── command lists ─────────────────────────

  /** A command list after `opener`, up to `closer` (`)` of `$(`, a backquote, or the end of the text). */
  private commands(opener: string, closer: "" | ")" | "`"): void {
    this.emit(opener);
    this.nested(() => {
      const state: CommandState = { words: [], hereStrings: [], heredocs: [], caseDepth: 0, parenDepth: 0 };
      this.readUntil(
        (ch) => ch === closer && (closer === "`" || (state.parenDepth === 0 && state.caseDepth === 0 && !state.test)),
        (ch) => this.commandCharacter(state, ch),
      );
      this.endCommand(state);
      this.emit(this.at());
    });
  }

  private word(state: CommandState): Word {
    state.word ??= token("");
    return state.word;
  }

  private wordSink(word: Word): Sink {
    return {
      mark: (index) => {
        word.marks.push(index);
        word.raw += MARK_IN_WORD;
      },
      text: (chunk) => {
        word.raw += chunk;
      },
    };
  }

  private commandCharacter(state: CommandState, ch: string): void {
    const next = this.at(1);
    const word = state.word;
    if (ch === "\\" && next === "\n") {
      // A line continuation: bash removes it, so it neither starts nor ends a word.
      this.emit("\\\n");
    } else if (ch === MARK || "\\'\"$`".includes(ch)) {
      this.word(state).bare = false;
      this.expansion(this.wordSink(this.word(state)), "plain");
    } else if (ch === "#" && word === undefined && !state.test) {
      this.comment();
    } else if (ch === " " || ch === "\t" || ch === "\n") {
      this.endWord(state);
      this.emit(ch);
      if (ch === "\n" && !state.test) {
        this.endCommand(state);
        // The bodies of the heredocs this line opened.
        state.heredocs.splice(0).forEach((heredoc) => this.heredocBody(heredoc));
      }
    } else if (ch === "(" && word?.assign !== undefined && word.raw.endsWith("=")) {
      this.compound(word);
    } else if (";&|()<>".includes(ch)) {
      this.endWord(state);
      this.operator(state, ch, next, word === undefined);
    } else {
      this.wordCharacter(state, ch);
    }
  }

  /** An operator character after the word it ends (which may have opened `[[`). */
  private operator(state: CommandState, ch: string, next: string, wordless: boolean): void {
    const testOperator = state.test ? this.match("testOperator") : "";
    if (testOperator !== "") {
      state.words.push(token(testOperator));
      this.emit(testOperator);
    } else if (ch === "<" || ch === ">" || (ch === "&" && next === ">")) {
      this.redirection(state, ch, next);
    } else if (ch === "(" && wordless && next === "(") {
      this.arithmetic("((", "))", "arithmetic (( ))");
    } else if (ch === "(") {
      this.openParen(state);
    } else {
      this.endCommand(state);
      state.parenDepth = Math.max(0, state.parenDepth - (ch === ")" ? 1 : 0));
      this.emit(ch);
    }
  }

  /** Any other character; `[` after a name starts a subscript, `=` after `name`, `name[…]` or `name+` an assignment. */
  private wordCharacter(state: CommandState, ch: string): void {
    const word = this.word(state);
    if (ch === "[" && word.bare && NAME.test(word.raw)) {
      word.raw += "[]";
      word.bare = false;
      this.arithmetic("[", "]", "an array subscript name[…]");
    } else if (ch === "=" && word.assign === undefined && ASSIGNMENT_TARGET.test(word.raw)) {
      word.assign = ASSIGNMENT_TARGET.exec(word.raw)?.[1];
      word.raw += "=";
      this.emit("=");
    } else {
      word.raw += ch;
      this.emit(ch);
    }
  }

  /** `name ()` defines a function; any other `(` opens a subshell. */
  private openParen(state: CommandState): void {
    const definition = this.match("functionParens");
    const named = state.words.filter((word) => !(word.bare && (word.raw === "function" || RESERVED.has(word.raw))));
    if (definition !== "" && named.length === 1 && named[0] !== undefined && named[0].bare) {
      this.functions.add(named[0].raw);
      state.words = [];
      this.emit(definition);
      return;
    }
    this.endCommand(state);
    state.parenDepth += 1;
    this.emit("(");
  }

  private redirection(state: CommandState, ch: string, next: string): void {
    if (next === "(") {
      // Process substitution: a word whose commands are read like `$(…)`.
      this.word(state).bare = false;
      this.commands(`${ch}(`, ")");
      return;
    }
    const operator = this.match("redirection") || ch;
    this.emit(operator);
    state.nextRedirect = operator;
  }

  /** `NAME=(…)`: elements are data, but an element's `[…]=` subscript is evaluated. */
  private compound(word: Word): void {
    this.nested(() => {
      word.compound = true;
      const sink = this.wordSink(word);
      this.copy(sink, "(");
      let elementStart = true;
      this.readUntil(")", (ch) => {
        const blank = ch === " " || ch === "\t" || ch === "\n";
        if (blank) {
          this.emit(ch);
        } else if (ch === "[" && elementStart) {
          this.arithmetic("[", "]", "an array subscript ([…]=…)");
        } else if (ch === "#" && elementStart) {
          this.comment();
        } else if (!this.expansion(sink, "plain")) {
          this.copy(sink, ch);
        }
        elementStart = blank;
      });
      this.copy(sink, this.at());
    });
  }

  private comment(): void {
    this.readUntil("\n", (ch) => (ch === MARK ? this.mark("plain") : this.emit(ch)));
  }

  /** A heredoc's lines up to its delimiter: unquoted, they expand like `"…"` (without the quotes) and feed `read`. */
  private heredocBody(heredoc: Heredoc): void {
    const stdin: Sink = { mark: (index) => this.flow("<stdin>", [index], []), text: () => {} };
    while (this.i < this.text.length) {
      const end = this.text.indexOf("\n", this.i);
      const line = this.text.slice(this.i, end === -1 ? this.text.length : end + 1);
      const last = line.replace(heredoc.stripTabs ? /^\t+|\n$/g : /\n$/, "") === heredoc.delimiter;
      if (heredoc.quoted && line.includes(MARK)) {
        throw EngineError.terminal(
          "shell.unsafe_template",
          `a {{…}} inside a quoted heredoc (<<'${heredoc.delimiter}') is never expanded; quote nothing in the delimiter (<<${heredoc.delimiter}) to pass the value`,
        );
      }
      if (heredoc.quoted || last) {
        this.emit(line);
      } else {
        this.expandingText(stdin, "\n");
      }
      if (last) {
        return;
      }
    }
  }

  // ───────────────────────── words and simple commands ─────────────────────────

  private endWord(state: CommandState): void {
    const word = state.word;
    if (word === undefined) {
      return;
    }
    state.word = undefined;
    if (state.nextRedirect !== undefined) {
      this.endRedirect(state, state.nextRedirect, word);
    } else if (state.test && isBare(word, "]]")) {
      this.analyzeTest(state.words);
      Object.assign(state, { words: [], test: false });
    } else if (!state.test && isBare(word, "[[") && isCommandPosition(state.words)) {
      Object.assign(state, { words: [], test: true });
    } else {
      if (!state.test && word.bare && isCommandPosition(state.words)) {
        state.caseDepth = Math.max(0, state.caseDepth + (word.raw === "case" ? 1 : word.raw === "esac" ? -1 : 0));
      }
      state.words.push(word);
    }
  }

  /** The word after a redirection operator: a heredoc's delimiter, or a file. */
  private endRedirect(state: CommandState, operator: string, word: Word): void {
    state.nextRedirect = undefined;
    if (operator === "<<<") {
      state.hereStrings.push(word);
    }
    if (operator === "<<" || operator === "<<-") {
      state.heredocs.push({
        delimiter: word.raw.replace(/['"\\]/g, ""),
        quoted: /['"\\]/.test(word.raw),
        stripTabs: operator === "<<-",
      });
    }
  }

  private endCommand(state: CommandState): void {
    this.endWord(state);
    if (!state.test) {
      this.analyze(state.words, state.hereStrings);
    }
    Object.assign(state, { words: [], hereStrings: [], nextRedirect: undefined, test: false });
  }

  /** One simple command: what its command word makes of its arguments. */
  private analyze(words: Word[], hereStrings: Word[]): void {
    let k = 0;
    for (let word = words[0]; word?.bare === true; word = words[k]) {
      if (word.raw === "for" || word.raw === "select") {
        this.forLoop(words.slice(k + 1));
        return;
      }
      if (word.raw === "function") {
        const name = words[k + 1];
        if (name !== undefined) {
          this.functions.add(name.raw);
        }
        k += 1;
      } else if (!RESERVED.has(word.raw)) {
        break;
      }
      k += 1;
    }
    for (let word = words[k]; word?.assign !== undefined; word = words[k]) {
      this.flow(word.assign, word.marks, references(valueOf(word)));
      k += 1;
    }
    const command = words[k];
    if (command === undefined || !command.bare) {
      return;
    }
    const args = words.slice(k + 1);
    if (command.raw === "command" || command.raw === "builtin") {
      const withoutOptions = args.filter((arg) => !(arg.bare && arg.raw.startsWith("-")));
      this.analyze(withoutOptions, hereStrings);
      return;
    }
    this.builtin(command.raw, args, hereStrings);
  }

  private builtin(name: string, args: Word[], hereStrings: Word[]): void {
    const evaluateAll = (context: string, names: NamesIn) => this.evaluateArgs(args, context, names);
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
        this.read(args, hereStrings);
        return evaluateAll("a variable name (read)", "references");
      case "printf":
        this.afterOption(args, "-v", "a variable name (printf -v)");
        return this.flowFrom("<stdin>", args);
      case "echo":
        return this.flowFrom("<stdin>", args);
      case "test":
      case "[":
        return this.afterOption(args, "-v", "a variable name (test -v)");
      case "set":
        return this.flowFrom("@", args);
      default:
        if (DECLARATIONS.has(name)) {
          return this.declaration(name, args);
        }
        if (SHELLS.has(name)) {
          return this.shellScript(name, args);
        }
        this.calls.push({ name, args });
    }
  }

  /** Every mark of `args` is evaluated in `context`, and the names their text mentions are noted. */
  private evaluateArgs(args: Word[], context: string, names: NamesIn): void {
    for (const arg of args) {
      const text = names === "unquoted references" ? withoutSingleQuoted(arg.raw) : arg.raw;
      this.evaluateText(arg.marks, text, context, names === "all" ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
    }
  }

  /** Marks and references in the argument after `option` are evaluated (a variable name follows `-v`). */
  private afterOption(args: Word[], option: string, context: string): void {
    args.forEach((arg, index) => {
      const value = args[index + 1];
      if (isBare(arg, option) && value !== undefined) {
        this.evaluateText(value.marks, value.raw, context);
      }
    });
  }

  /** `read x y` takes what its standard input carries: here-strings, heredocs, and what `echo`/`printf` print. */
  private read(args: Word[], hereStrings: Word[]): void {
    this.flowFrom("<stdin>", hereStrings);
    args.filter((arg) => arg.bare && NAME.test(arg.raw)).forEach((arg) => this.flow(arg.raw, [], ["<stdin>"]));
  }

  private forLoop(rest: Word[]): void {
    const variable = rest[0];
    const inAt = rest.findIndex((word) => isBare(word, "in"));
    if (variable !== undefined && inAt === -1) {
      this.flow(variable.raw, [], ["@"]);
    } else if (variable !== undefined) {
      this.flowFrom(variable.raw, rest.slice(inAt + 1));
    }
  }

  /**
   * `declare`, `local`, `typeset`, `readonly`, `export`: a name is evaluated
   * (a subscript in it is arithmetic); so is a value with `-i` (arithmetic),
   * `-n` (a name), or `-a`/`-A` without parentheses (bash parses a quoted
   * `(…)` value as a compound assignment).
   */
  private declaration(name: string, args: Word[]): void {
    const isFlag = (arg: Word) => arg.bare && FLAG.test(arg.raw);
    const flags = args.map((arg) => (isFlag(arg) ? arg.raw.slice(1) : "")).join("");
    const context = `a variable name or value (${name}${flags === "" ? "" : ` -${flags}`})`;
    for (const arg of args.filter((candidate) => !isFlag(candidate))) {
      const target = arg.assign ?? (NAME.test(arg.raw) ? arg.raw : undefined);
      if (arg.assign === undefined) {
        this.evaluateText(arg.marks, arg.raw, context);
      } else {
        this.flow(arg.assign, arg.marks, references(valueOf(arg)));
      }
      if (/[in]/.test(flags) || (/[aA]/.test(flags) && !arg.compound)) {
        const valueMarks = arg.assign === undefined ? [] : arg.marks;
        this.evaluateText(valueMarks, valueOf(arg), context, /i/.test(flags) ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
      }
      if (/i/.test(flags) && target !== undefined) {
        this.noteNames(target, context);
      }
    }
  }

  /** `bash -c SCRIPT …`: the script is code. */
  private shellScript(name: string, args: Word[]): void {
    const at = args.findIndex((arg) => arg.bare && /^-[A-Za-z]*c[A-Za-z]*$/.test(arg.raw));
    const script = at === -1 ? undefined : args[at + 1];
    if (script !== undefined) {
      this.evaluateText(script.marks, withoutSingleQuoted(script.raw), `the script of ${name} -c`);
    }
  }

  /** `[[ … ]]`: an operand of an arithmetic comparison is evaluated as arithmetic; the word after `-v` is a name. */
  private analyzeTest(tokens: Word[]): void {
    const isOperator = (word: Word | undefined) => word?.bare === true && ARITHMETIC_TEST_OPERATORS.has(word.raw);
    tokens.forEach((word, index) => {
      const before = tokens[index - 1];
      if (isOperator(before) || isOperator(tokens[index + 1])) {
        this.evaluateText(word.marks, word.raw, "an operand of [[ … -eq/-ne/-lt/-le/-gt/-ge … ]]", NAMES_IN_TEXT);
      } else if (isBare(before, "-v")) {
        this.evaluateText(word.marks, word.raw, "a variable name ([[ -v … ]])");
      }
    });
  }
}

/** Whether `word` is `raw`, written without quotes or expansions. */
function isBare(word: Word | undefined, raw: string): boolean {
  return word?.bare === true && word.raw === raw;
}

/** A word read as it is written (an operator of `[[ … ]]`, or an empty word to fill). */
function token(raw: string): Word {
  return { raw, bare: true, marks: [], assign: undefined, compound: false };
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

/** The variables a word expands (`$x`, `${x…}`), or the names `pattern` finds; `@` for the positional parameters. */
function references(text: string, pattern = REFERENCES_IN_TEXT): string[] {
  return [...text.matchAll(pattern)].map((match) =>
    match[1] !== undefined && !NAME.test(match[1]) ? "@" : (match[1] ?? match[0]),
  );
}

/** The text without its single-quoted parts (outside double quotes), which no expansion reaches. */
function withoutSingleQuoted(text: string): string {
  return text.replace(/"[^"]*"?|'[^']*'?/g, (quoted) => (quoted.startsWith("'") ? "" : quoted));
}
