import {
  ARITHMETIC_TEST_OPERATORS,
  type CommandState,
  DECLARATIONS,
  isCommandPosition,
  NAME,
  NAMES_IN_TEXT,
  references,
  REFERENCES_IN_TEXT,
  RESERVED,
  SHELLS,
  type ShellScan,
  valueOf,
  withoutSingleQuoted,
  type Word,
} from "./shell-scan-core.ts";
import { CommandScanner } from "./shell-scan-commands.ts";

/** Which names in an argument's text bash evaluates: any name, references (`$x`), or references outside single quotes. */
type NamesIn = "all" | "references" | "unquoted references";

/** The whole reader: what each simple command makes bash evaluate, and where variables flow. */
export class Scanner extends CommandScanner {
  run(): ShellScan {
    this.commands("");
    for (const call of this.calls) {
      if (this.functions.has(call.name)) {
        this.flow("@", call.marks, call.from);
      }
    }
    return { command: this.out, evaluated: this.evaluated, evaluatedNames: this.names, flows: this.flows };
  }

  // ───────────────────────── words and simple commands ─────────────────────────

  protected endWord(state: CommandState): void {
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
        this.analyzeTest(state.words);
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

  protected endCommand(state: CommandState): void {
    this.endWord(state);
    if (!state.test) {
      this.analyze(state.words, state.redirects);
    }
    state.words = [];
    state.redirects = [];
    state.nextRedirect = undefined;
    state.test = false;
  }

  /** One simple command: what its command word makes of its arguments. */
  protected analyze(words: Word[], redirects: { operator: string; word: Word }[]): void {
    let k = 0;
    for (; k < words.length; k += 1) {
      const word = words[k];
      if (word === undefined || !word.bare) {
        break;
      }
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
        continue;
      }
      if (!RESERVED.has(word.raw)) {
        break;
      }
    }
    for (; k < words.length && words[k]?.assign !== undefined; k += 1) {
      const word = words[k];
      if (word?.assign !== undefined) {
        this.flow(word.assign, word.valueMarks, references(valueOf(word)));
      }
    }
    const command = words[k];
    if (command === undefined || !command.bare) {
      return;
    }
    const args = words.slice(k + 1);
    if (command.raw === "command" || command.raw === "builtin") {
      this.analyze(
        args.filter((arg) => !(arg.bare && arg.raw.startsWith("-"))),
        redirects,
      );
      return;
    }
    this.builtin(command.raw, args, redirects);
  }

  protected builtin(name: string, args: Word[], redirects: { operator: string; word: Word }[]): void {
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
        this.read(args, redirects);
        return evaluateAll("a variable name (read)", "references");
      case "printf":
        this.afterOption(args, "-v", "a variable name (printf -v)");
        this.flow(
          "<stdin>",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      case "echo":
        this.flow(
          "<stdin>",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      case "test":
      case "[":
        return this.afterOption(args, "-v", "a variable name (test -v)");
      case "set":
        this.flow(
          "@",
          args.flatMap((arg) => arg.marks),
          args.flatMap((arg) => references(arg.raw)),
        );
        return;
      default:
        if (DECLARATIONS.has(name)) {
          return this.declaration(name, args);
        }
        if (SHELLS.has(name)) {
          return this.shellScript(name, args);
        }
        this.calls.push({
          name,
          marks: args.flatMap((arg) => arg.marks),
          from: args.flatMap((arg) => references(arg.raw)),
        });
    }
  }

  /** Every mark of `args` is evaluated in `context`, and the names their text mentions are noted. */
  protected evaluateArgs(args: Word[], context: string, names: NamesIn): void {
    for (const arg of args) {
      arg.marks.forEach((index) => this.evaluate(index, context));
      const text = names === "unquoted references" ? withoutSingleQuoted(arg.raw) : arg.raw;
      this.noteNames(text, context, names === "all" ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
    }
  }

  /** Marks and references in the argument after `option` are evaluated (a variable name follows `-v`). */
  protected afterOption(args: Word[], option: string, context: string): void {
    args.forEach((arg, index) => {
      const value = args[index + 1];
      if (arg.bare && arg.raw === option && value !== undefined) {
        value.marks.forEach((mark) => this.evaluate(mark, context));
        this.noteNames(value.raw, context, REFERENCES_IN_TEXT);
      }
    });
  }

  /** `read x y` takes what its standard input carries: here-strings, heredocs, and what `echo`/`printf` print. */
  protected read(args: Word[], redirects: { operator: string; word: Word }[]): void {
    for (const { operator, word } of redirects) {
      if (operator === "<<<") {
        this.flow("<stdin>", word.marks, references(word.raw));
      }
    }
    for (const arg of args) {
      if (arg.bare && NAME.test(arg.raw)) {
        this.flow(arg.raw, [], ["<stdin>"]);
      }
    }
  }

  protected forLoop(rest: Word[]): void {
    const variable = rest[0];
    if (variable === undefined) {
      return;
    }
    const inAt = rest.findIndex((word) => word.bare && word.raw === "in");
    if (inAt === -1) {
      this.flow(variable.raw, [], ["@"]);
      return;
    }
    const items = rest.slice(inAt + 1);
    this.flow(
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
  protected declaration(name: string, args: Word[]): void {
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
      arg.marks.filter((index) => !valueMarks.has(index)).forEach((index) => this.evaluate(index, context));
      const target = arg.assign ?? (NAME.test(arg.raw) ? arg.raw : undefined);
      if (arg.assign === undefined) {
        this.noteNames(arg.raw, context, REFERENCES_IN_TEXT);
      } else {
        this.flow(arg.assign, arg.valueMarks, references(valueOf(arg)));
      }
      if (/[in]/.test(flags) || (/[aA]/.test(flags) && !arg.compound)) {
        arg.valueMarks.forEach((index) => this.evaluate(index, context));
        this.noteNames(valueOf(arg), context, /i/.test(flags) ? NAMES_IN_TEXT : REFERENCES_IN_TEXT);
      }
      if (/i/.test(flags) && target !== undefined) {
        this.noteNames(target, context);
      }
    }
  }

  /** `bash -c SCRIPT …`: the script is code. */
  protected shellScript(name: string, args: Word[]): void {
    const at = args.findIndex((arg) => arg.bare && /^-[A-Za-z]*c[A-Za-z]*$/.test(arg.raw));
    const script = at === -1 ? undefined : args[at + 1];
    if (script !== undefined) {
      const context = `the script of ${name} -c`;
      script.marks.forEach((index) => this.evaluate(index, context));
      this.noteNames(withoutSingleQuoted(script.raw), context, REFERENCES_IN_TEXT);
    }
  }

  /** `[[ … ]]`: an operand of an arithmetic comparison is evaluated as arithmetic; the word after `-v` is a name. */
  protected analyzeTest(tokens: Word[]): void {
    tokens.forEach((token, index) => {
      const before = tokens[index - 1];
      const after = tokens[index + 1];
      const isOperator = (word: Word | undefined) =>
        word !== undefined && word.bare && ARITHMETIC_TEST_OPERATORS.has(word.raw);
      if (isOperator(before) || isOperator(after)) {
        const context = "an operand of [[ … -eq/-ne/-lt/-le/-gt/-ge … ]]";
        token.marks.forEach((mark) => this.evaluate(mark, context));
        this.noteNames(token.raw, context);
      } else if (before !== undefined && before.bare && before.raw === "-v") {
        const context = "a variable name ([[ -v … ]])";
        token.marks.forEach((mark) => this.evaluate(mark, context));
        this.noteNames(token.raw, context, REFERENCES_IN_TEXT);
      }
    });
  }
}
