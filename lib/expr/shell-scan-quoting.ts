import { MARK, type QuoteForm, type Sink } from "./shell-scan-core.ts";
import { ScanCore } from "./shell-scan-core.ts";

/** Quotes and expansions: `'…'`, `$'…'`, `"…"`, `$…`, `${…}`, arithmetic, backquotes. */
export abstract class QuotingScanner extends ScanCore {
  /** A command list up to `closer`: command substitutions read one (`shell-scan-commands.ts`). */
  protected abstract commands(closer: "" | ")" | "`"): void;

  // ───────────────────────── quoting and expansions ─────────────────────────

  protected single(sink: Sink): void {
    this.emit("'");
    sink.text("'");
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === "'") {
        sink.text("'");
        this.emit("'");
        return;
      }
      if (ch === MARK) {
        sink.mark(this.mark("single"));
        continue;
      }
      sink.text(ch);
      this.emit(ch);
    }
  }

  protected ansi(sink: Sink): void {
    this.emit("$'");
    sink.text("$'");
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === "'") {
        sink.text("'");
        this.emit("'");
        return;
      }
      if (ch === "\\") {
        this.escape(sink);
        continue;
      }
      if (ch === MARK) {
        sink.mark(this.mark("ansi"));
        continue;
      }
      sink.text(ch);
      this.emit(ch);
    }
  }

  protected double(sink: Sink): void {
    this.nested(() => this.doubleBody(sink));
  }

  protected doubleBody(sink: Sink): void {
    this.emit('"');
    sink.text('"');
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === '"') {
        sink.text('"');
        this.emit('"');
        return;
      }
      if (ch === "\\") {
        if (this.at(1) === MARK || '$`"\\\n'.includes(this.at(1))) {
          this.escape(sink);
        } else {
          sink.text(ch);
          this.emit(ch);
        }
        continue;
      }
      this.quotedCharacter(sink, "double");
    }
  }

  /** One character inside double quotes or an unquoted heredoc body (not `"`, not a backslash). */
  protected quotedCharacter(sink: Sink, form: QuoteForm): void {
    const ch = this.at();
    if (ch === MARK) {
      sink.mark(this.mark(form));
    } else if (ch === "$") {
      this.dollar(sink, "double");
    } else if (ch === "`") {
      this.backquote();
    } else {
      sink.text(ch);
      this.emit(ch);
    }
  }

  /** `$…` at the cursor: an expansion, a quote, or a plain dollar. */
  protected dollar(sink: Sink, form: QuoteForm): void {
    const next = this.at(1);
    if (this.text.startsWith("$((", this.i)) {
      this.emit("$((");
      this.arithmetic("))", "arithmetic $(( ))");
    } else if (next === "(") {
      this.emit("$(");
      this.commands(")");
    } else if (next === "{") {
      this.parameter(sink, form);
    } else if (next === "[") {
      this.emit("$[");
      this.arithmetic("]", "arithmetic $[ ]");
    } else if (next === "'" && form === "plain") {
      this.ansi(sink);
    } else if (next === '"' && form === "plain") {
      this.emit("$");
      this.double(sink);
    } else {
      const name = this.match("dollarName", 1);
      sink.text(`$${name}`);
      this.emit(`$${name}`);
    }
  }

  /** `${…}`: the name and subscript are evaluated, so are substring offsets; the word of an operator is not. */
  protected parameter(sink: Sink, form: QuoteForm): void {
    this.nested(() => this.parameterBody(sink, form));
  }

  protected parameterBody(sink: Sink, form: QuoteForm): void {
    this.emit("${");
    sink.text("${");
    let prefix = "";
    if ((this.at() === "!" || this.at() === "#") && this.at(1) !== "}") {
      prefix = this.at();
      sink.text(prefix);
      this.emit(prefix);
    }
    let name = "";
    if (this.at() === MARK) {
      this.evaluate(this.mark("bare"), "a parameter name ${…}");
    } else {
      name = this.match("parameterName");
      sink.text(name);
      this.emit(name);
    }
    // `${!x}` uses x's value as a name; `${!x*}`, `${!x@}` and `${!a[@]}` list names and keys.
    if (prefix === "!" && name !== "" && !"*@[".includes(this.at())) {
      this.noteNames(name, "an indirection ${!…}");
    }
    if (this.at() === "[") {
      this.emit("[");
      sink.text("[]");
      this.arithmetic("]", "an array subscript ${name[…]}");
    }
    const op = this.at();
    if (op === "}") {
      sink.text("}");
      this.emit("}");
      return;
    }
    if (op === ":" && !"-=+?".includes(this.at(1))) {
      this.emit(":");
      this.arithmetic("}", "a substring offset or length ${var:…}");
      sink.text("}");
      return;
    }
    if (op === "@" && this.at(1) === "P" && name !== "") {
      this.noteNames(name, "a prompt expansion ${…@P}");
    }
    const operator = this.match("parameterOperator");
    sink.text(operator);
    this.emit(operator);
    this.parameterWord(sink, form === "double" ? "double" : form === "bare" ? "bare" : "plain");
  }

  /** The word of `${x:-word}`, `${x/pattern/word}`…, up to the closing brace. */
  protected parameterWord(sink: Sink, form: QuoteForm): void {
    this.nested(() => this.parameterWordBody(sink, form));
  }

  protected parameterWordBody(sink: Sink, form: QuoteForm): void {
    let depth = 0;
    while (this.i < this.text.length) {
      const ch = this.at();
      if (ch === "}" && depth === 0) {
        sink.text("}");
        this.emit("}");
        return;
      }
      if (ch === "{" || ch === "}") {
        depth += ch === "{" ? 1 : -1;
        sink.text(ch);
        this.emit(ch);
      } else if (ch === "\\") {
        this.escape(sink);
      } else if (ch === "'" && form !== "double") {
        this.single(sink);
      } else if (ch === '"') {
        this.double(sink);
      } else if (ch === MARK) {
        sink.mark(this.mark(form));
      } else if (ch === "$") {
        this.dollar(sink, form === "double" ? "double" : "plain");
      } else if (ch === "`") {
        this.backquote();
      } else {
        sink.text(ch);
        this.emit(ch);
      }
    }
  }

  /**
   * Text bash evaluates as arithmetic, up to `closer`: every mark in it is
   * evaluated, and so is every variable it names.
   */
  protected arithmetic(closer: "))" | "]" | "}", context: string): void {
    this.nested(() => this.arithmeticBody(closer, context));
  }

  protected arithmeticBody(closer: "))" | "]" | "}", context: string): void {
    const sink = this.evaluatingSink(context);
    let parens = 0;
    let brackets = 0;
    while (this.i < this.text.length) {
      const ch = this.at();
      if (closer === "))" && parens === 0 && this.text.startsWith("))", this.i)) {
        this.emit("))");
        break;
      }
      if ((closer === "]" && ch === "]" && brackets === 0) || (closer === "}" && ch === "}")) {
        this.emit(ch);
        break;
      }
      if (ch === MARK) {
        sink.mark(this.mark("bare"));
      } else if (ch === "$") {
        this.dollar(sink, "bare");
      } else if (ch === "`") {
        this.backquote();
      } else if (ch === '"') {
        this.double(sink);
      } else if (ch === "'") {
        this.single(sink);
      } else if (ch === "\\") {
        this.escape(sink);
      } else {
        parens += ch === "(" ? 1 : ch === ")" ? -1 : 0;
        brackets += ch === "[" ? 1 : ch === "]" ? -1 : 0;
        sink.text(ch);
        this.emit(ch);
      }
    }
    sink.done();
  }

  protected backquote(): void {
    this.emit("`");
    this.commands("`");
  }
}
