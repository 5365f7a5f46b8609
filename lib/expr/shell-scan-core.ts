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

export interface Sink {
  mark(index: number): void;
  text(chunk: string): void;
}

export interface Word {
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

export interface Heredoc {
  delimiter: string;
  quoted: boolean;
  stripTabs: boolean;
}

/** One simple command being read, inside one command list. */
export interface CommandState {
  words: Word[];
  redirects: { operator: string; word: Word }[];
  word: Word | undefined;
  test: boolean;
  nextRedirect: string | undefined;
  heredocs: Heredoc[];
  caseDepth: number;
  parenDepth: number;
}

export const MARK_IN_WORD = "\u0001";
export const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const ASSIGNMENT_TARGET = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[\])?\+?$/;
export const RESERVED = new Set([
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
export const ARITHMETIC_TEST_OPERATORS = new Set(["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]);
export const DECLARATIONS = new Set(["declare", "typeset", "local", "readonly", "export"]);
export const SHELLS = new Set(["bash", "sh", "dash", "zsh", "ksh", "/bin/bash", "/bin/sh", "/usr/bin/bash"]);
/** Identifiers and references to the positional parameters in a stretch of evaluated text. */
export const NAMES_IN_TEXT = /\$\{?[!#]?([0-9]+|[@*])|[A-Za-z_][A-Za-z0-9_]*/g;
/** `${#x}`, `${#a[@]}`, `${#1}`: lengths, which name a variable without evaluating its value. */
const LENGTH_EXPANSION = /\$\{#[A-Za-z0-9_@*]*(?:\[[^\]]*\])?\}/g;
/** Only what a `$` expands: `$x`, `${x…}`, `$1`, `$@`. */
export const REFERENCES_IN_TEXT = /\$\{?[!#]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])/g;
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

/** The scanner's state and the primitives every reader uses: cursor, output, marks, notes. */
export abstract class ScanCore {
  protected readonly text: string;
  protected readonly reference: (index: number, form: QuoteForm) => string;
  protected i = 0;
  protected out = "";
  protected depth = 0;
  protected readonly evaluated = new Map<number, string>();
  protected readonly names = new Map<string, string>();
  protected readonly flows = new Map<string, Flow>();
  protected readonly functions = new Set<string>();
  protected readonly calls: { name: string; marks: number[]; from: string[] }[] = [];
  protected readonly patterns = Object.fromEntries(
    Object.entries(AT_CURSOR).map(([name, pattern]) => [name, new RegExp(pattern.source, "y")]),
  ) as Record<keyof typeof AT_CURSOR, RegExp>;

  constructor(text: string, reference: (index: number, form: QuoteForm) => string) {
    this.text = text;
    this.reference = reference;
  }

  // ───────────────────────── low-level ─────────────────────────

  protected at(offset = 0): string {
    return this.text[this.i + offset] ?? "";
  }

  /** What `pattern` matches at `offset` from the cursor, or "". */
  protected match(pattern: keyof typeof AT_CURSOR, offset = 0): string {
    const sticky = this.patterns[pattern];
    sticky.lastIndex = this.i + offset;
    return sticky.exec(this.text)?.[0] ?? "";
  }

  /** Runs a nested reader, refusing text nested deeper than {@link MAX_SHELL_NESTING}. */
  protected nested(read: () => void): void {
    if (this.depth >= MAX_SHELL_NESTING) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        `command_template nests quotes, expansions or substitutions more than ${MAX_SHELL_NESTING} deep`,
      );
    }
    this.depth += 1;
    try {
      read();
    } finally {
      this.depth -= 1;
    }
  }

  protected emit(chunk: string): void {
    this.out += chunk;
    this.i += chunk.length;
  }

  /** Reads the mark at the cursor, writes its reference, and returns its index. */
  protected mark(form: QuoteForm): number {
    const end = this.text.indexOf(MARK, this.i + 1);
    const index = Number(this.text.slice(this.i + 1, end));
    this.out += this.reference(index, form);
    this.i = end + 1;
    return index;
  }

  /** A backslash: refuses one that would escape a reference, else copies it with the character it escapes. */
  protected escape(sink: Sink): void {
    if (this.at(1) === MARK) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        "a {{…}} right after a backslash in command_template: the backslash would escape the quoting of the value; remove it",
      );
    }
    const pair = this.text.slice(this.i, this.i + 2);
    sink.text(pair);
    this.emit(pair);
  }

  protected evaluate(index: number, context: string): void {
    if (!this.evaluated.has(index)) {
      this.evaluated.set(index, context);
    }
  }

  protected noteNames(text: string, context: string, pattern: RegExp = NAMES_IN_TEXT): void {
    // `${#x}` is x's length, never its value.
    const plain = text.replaceAll(MARK_IN_WORD, " ").replace(LENGTH_EXPANSION, " ");
    for (const match of plain.matchAll(pattern)) {
      const name = match[1] !== undefined && !NAME.test(match[1]) ? "@" : (match[1] ?? match[0]);
      if (!this.names.has(name)) {
        this.names.set(name, context);
      }
    }
  }

  protected flow(name: string, marks: readonly number[], from: readonly string[]): void {
    let flow = this.flows.get(name);
    if (flow === undefined) {
      flow = { marks: [], from: [] };
      this.flows.set(name, flow);
    }
    flow.marks.push(...marks);
    flow.from.push(...from);
  }

  /** A sink whose marks bash evaluates; the names in its text are noted when `done()` is called. */
  protected evaluatingSink(context: string): Sink & { done(): void } {
    let buffer = "";
    return {
      mark: (index) => this.evaluate(index, context),
      text: (chunk) => {
        buffer += chunk;
      },
      done: () => this.noteNames(buffer, context),
    };
  }
}

/** Before the command word: only reserved words and assignments so far. */
export function isCommandPosition(words: readonly Word[]): boolean {
  return words.every((word) => (word.bare && RESERVED.has(word.raw)) || word.assign !== undefined);
}

/** The part of an assignment word after its `=`. */
export function valueOf(word: Word): string {
  const at = word.raw.indexOf("=");
  return at === -1 ? word.raw : word.raw.slice(at + 1);
}

/** The variables a word expands (`$x`, `${x…}`; `@` for the positional parameters). */
export function references(text: string): string[] {
  return [...text.matchAll(REFERENCES_IN_TEXT)].map((match) => {
    const name = match[1] ?? "";
    return NAME.test(name) ? name : "@";
  });
}

/** The text without its single-quoted parts (outside double quotes), which no expansion reaches. */
export function withoutSingleQuoted(text: string): string {
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
