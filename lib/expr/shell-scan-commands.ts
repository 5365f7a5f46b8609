import { EngineError } from "../errors.ts";
import {
  ASSIGNMENT_TARGET,
  type CommandState,
  type Heredoc,
  MARK,
  MARK_IN_WORD,
  NAME,
  RESERVED,
  type Sink,
  type Word,
} from "./shell-scan-core.ts";
import { QuotingScanner } from "./shell-scan-quoting.ts";

/** Command lists: words, separators, redirections, compound commands, comments, heredocs. */
export abstract class CommandScanner extends QuotingScanner {
  /** Ends the word being read (`shell-scan-analysis.ts`). */
  protected abstract endWord(state: CommandState): void;
  /** Ends the simple command being read and analyzes it (`shell-scan-analysis.ts`). */
  protected abstract endCommand(state: CommandState): void;

  // ───────────────────────── commands ─────────────────────────

  /** A command list, up to `closer` (`)` of `$(`, a backquote, or the end of the text). */
  protected commands(closer: "" | ")" | "`"): void {
    this.nested(() => this.commandsBody(closer));
  }

  protected commandsBody(closer: "" | ")" | "`"): void {
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
    while (this.i < this.text.length) {
      const ch = this.at();
      if (
        (closer === "`" && ch === "`") ||
        (closer === ")" && ch === ")" && state.parenDepth === 0 && state.caseDepth === 0 && !state.test)
      ) {
        this.endCommand(state);
        this.emit(ch);
        return;
      }
      this.commandCharacter(state, ch);
    }
    this.endCommand(state);
  }

  protected word(state: CommandState): Word {
    state.word ??= { raw: "", bare: true, marks: [], valueMarks: [], assign: undefined, compound: false };
    return state.word;
  }

  protected wordSink(word: Word): Sink {
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

  protected commandCharacter(state: CommandState, ch: string): void {
    const next = this.at(1);
    if (ch === MARK || ch === "\\" || ch === "'" || ch === '"' || ch === "$" || ch === "`") {
      this.wordExpansion(state, ch, next);
      return;
    }
    if (ch === "#" && state.word === undefined && !state.test) {
      this.comment();
    } else if (ch === " " || ch === "\t") {
      this.endWord(state);
      this.emit(ch);
    } else if (ch === "\n") {
      this.endWord(state);
      this.emit(ch);
      if (!state.test) {
        this.endCommand(state);
        this.heredocBodies(state);
      }
    } else if (ch === ";" || ch === "&" || ch === "|") {
      this.separator(state, ch, next);
    } else if (ch === "(") {
      this.openParen(state, next);
    } else if (ch === ")") {
      this.endWord(state);
      if (state.test) {
        state.words.push(this.token(ch));
      } else {
        this.endCommand(state);
        state.parenDepth = Math.max(0, state.parenDepth - 1);
      }
      this.emit(ch);
    } else if (ch === "<" || ch === ">") {
      this.redirection(state, ch, next);
    } else if (ch === "[" && state.word !== undefined && state.word.bare && NAME.test(state.word.raw)) {
      state.word.raw += "[]";
      state.word.bare = false;
      this.emit("[");
      this.arithmetic("]", "an array subscript name[…]");
    } else if (
      ch === "=" &&
      state.word !== undefined &&
      state.word.assign === undefined &&
      ASSIGNMENT_TARGET.test(state.word.raw)
    ) {
      state.word.assign = ASSIGNMENT_TARGET.exec(state.word.raw)?.[1];
      state.word.raw += "=";
      this.emit("=");
    } else {
      this.word(state).raw += ch;
      this.emit(ch);
    }
  }

  /** A mark, a backslash, a quote or an expansion in a word (a backslash-newline continues the line). */
  protected wordExpansion(state: CommandState, ch: string, next: string): void {
    const word = this.word(state);
    const sink = this.wordSink(word);
    if (ch === MARK) {
      sink.mark(this.mark("plain"));
      word.bare = false;
    } else if (ch === "\\" && next === "\n") {
      this.emit("\\\n");
    } else {
      word.bare = false;
      this.quoted(sink, ch);
    }
  }

  /** A quote, an expansion or a backslash inside a word. */
  protected quoted(sink: Sink, ch: string): void {
    if (ch === "\\") {
      this.escape(sink);
    } else if (ch === "'") {
      this.single(sink);
    } else if (ch === '"') {
      this.double(sink);
    } else if (ch === "$") {
      this.dollar(sink, "plain");
    } else {
      this.backquote();
    }
  }

  protected token(raw: string): Word {
    return { raw, bare: true, marks: [], valueMarks: [], assign: undefined, compound: false };
  }

  protected separator(state: CommandState, ch: string, next: string): void {
    this.endWord(state);
    if (state.test && (ch === "&" || ch === "|") && next === ch) {
      state.words.push(this.token(ch + ch));
      this.emit(ch + ch);
      return;
    }
    if (ch === "&" && next === ">") {
      this.redirection(state, ch, next);
      return;
    }
    this.endCommand(state);
    this.emit(ch);
  }

  protected openParen(state: CommandState, next: string): void {
    const word = state.word;
    if (word === undefined && next === "(" && !state.test) {
      this.emit("((");
      this.arithmetic("))", "arithmetic (( ))");
      return;
    }
    if (word !== undefined && word.assign !== undefined && word.raw.endsWith("=")) {
      this.compound(word);
      return;
    }
    this.endWord(state);
    if (state.test) {
      state.words.push(this.token("("));
      this.emit("(");
      return;
    }
    const definition = this.match("functionParens");
    const named = state.words.filter(
      (candidate) => !(candidate.bare && (candidate.raw === "function" || RESERVED.has(candidate.raw))),
    );
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

  protected redirection(state: CommandState, ch: string, next: string): void {
    this.endWord(state);
    if (state.test) {
      state.words.push(this.token(ch));
      this.emit(ch);
      return;
    }
    if (next === "(") {
      // Process substitution: a word whose commands are read like `$(…)`.
      this.word(state).bare = false;
      this.emit(`${ch}(`);
      this.commands(")");
      return;
    }
    const operator = this.match("redirection") || ch;
    this.emit(operator);
    state.nextRedirect = operator;
  }

  /** `NAME=(…)`: elements are data, but an element's `[…]=` subscript is evaluated. */
  protected compound(word: Word): void {
    this.nested(() => this.compoundBody(word));
  }

  protected compoundBody(word: Word): void {
    word.compound = true;
    word.raw += "(";
    this.emit("(");
    const sink = this.wordSink(word);
    let elementStart = true;
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === ")") {
        word.raw += ")";
        this.emit(")");
        return;
      }
      if (ch === " " || ch === "\t" || ch === "\n") {
        this.emit(ch);
        elementStart = true;
        continue;
      }
      if (ch === "[" && elementStart) {
        this.emit("[");
        this.arithmetic("]", "an array subscript ([…]=…)");
      } else if (ch === "#" && elementStart) {
        this.comment();
      } else if (ch === MARK) {
        sink.mark(this.mark("plain"));
      } else if (ch === "\\" || ch === "'" || ch === '"' || ch === "$" || ch === "`") {
        this.quoted(sink, ch);
      } else {
        sink.text(ch);
        this.emit(ch);
      }
      elementStart = false;
    }
  }

  protected comment(): void {
    while (this.i < this.text.length && this.at() !== "\n") {
      if (this.at() === MARK) {
        this.mark("plain");
      } else {
        this.emit(this.at());
      }
    }
  }

  protected heredocBodies(state: CommandState): void {
    for (const heredoc of state.heredocs) {
      this.heredocBody(heredoc);
    }
    state.heredocs = [];
  }

  /** A heredoc's lines up to its delimiter: unquoted, they expand like `"…"` (without the quotes) and feed `read`. */
  protected heredocBody(heredoc: Heredoc): void {
    const stdin: Sink = { mark: (index) => this.flow("<stdin>", [index], []), text: () => {} };
    while (this.i < this.text.length) {
      const end = this.text.indexOf("\n", this.i);
      const line = this.text.slice(this.i, end === -1 ? this.text.length : end);
      if ((heredoc.stripTabs ? line.replace(/^\t+/, "") : line) === heredoc.delimiter) {
        this.emit(end === -1 ? line : `${line}\n`);
        return;
      }
      if (heredoc.quoted) {
        if (line.includes(MARK)) {
          throw EngineError.terminal(
            "shell.unsafe_template",
            `a {{…}} inside a quoted heredoc (<<'${heredoc.delimiter}') is never expanded; quote nothing in the delimiter (<<${heredoc.delimiter}) to pass the value`,
          );
        }
        this.emit(end === -1 ? line : `${line}\n`);
        continue;
      }
      this.heredocLine(stdin);
    }
  }

  protected heredocLine(sink: Sink): void {
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === "\n") {
        this.emit(ch);
        return;
      }
      if (ch === "\\") {
        if (this.at(1) === MARK || "$`\\\n".includes(this.at(1))) {
          this.escape(sink);
        } else {
          this.emit(ch);
        }
        continue;
      }
      this.quotedCharacter(sink, "double");
    }
  }
}
