/**
 * Renders a shell `command_template` so that no value can inject shell syntax.
 *
 * The quoting rule: a value never becomes part of the command text. Each
 * `{{…}}` (and `{{{…}}}`) is rendered as usual, but what it produced goes into an
 * environment variable `TRELLIS_IN_<n>` (n = 0, 1, … in order of appearance)
 * and the command text gets a quoted reference to that variable instead. The
 * shell expands a variable after it has parsed the command, and never parses
 * the expansion again, so `; rm -rf /`, `$(…)`, backquotes, quotes and newlines
 * in a value arrive as plain data.
 *
 * The reference is quoted for where the mustache stands in the template's own
 * quoting, so a value is always exactly one word (no splitting, no globbing):
 *
 * | the template has         | the command gets                   |
 * |--------------------------|------------------------------------|
 * | `echo {{x}}`             | `echo "${TRELLIS_IN_0}"`           |
 * | `echo "hi {{x}}"`        | `echo "hi ${TRELLIS_IN_0}"`        |
 * | `echo 'hi {{x}}'`        | `echo 'hi '"${TRELLIS_IN_0}"''`    |
 * | `echo $'hi {{x}}'`       | `echo $'hi '"${TRELLIS_IN_0}"$''`  |
 *
 * Limits of the quoting-context scanner (plain, double, single and `$'…'`
 * quotes with backslash escapes): it does not follow `$(…)` or backquotes
 * nested inside double quotes, heredoc bodies or comments. There a reference
 * may come out with extra quotes or unquoted (then the shell splits or globs
 * the value, or shows the quote characters), but it is still a variable
 * expansion: it can never run as code. A mustache right after a backslash is
 * refused (`shell.unsafe_template`): the backslash would escape the quoting.
 */
import { EngineError } from "../errors.ts";
import { renderTemplate } from "./template.ts";

/** Prefix of the environment variables that carry the rendered values. */
export const SHELL_VALUE_PREFIX = "TRELLIS_IN_";
/** At most this many mustaches may render in one command. */
export const MAX_SHELL_VALUES = 1_000;
/**
 * Largest value, in bytes: Linux refuses an environment string longer than
 * 128 KiB (MAX_ARG_STRLEN, `NAME=value` included). Larger data belongs in a
 * file (the `write_file` tool), passed by path.
 */
export const MAX_SHELL_VALUE_BYTES = 128 * 1024 - 64;
/** Largest total of all values, in bytes, well under the kernel's limit on argv plus environment. */
export const MAX_SHELL_VALUES_TOTAL_BYTES = 1024 * 1024;

/** A command ready to run: its text and the variables its references expand. */
export interface RenderedCommand {
  command: string;
  env: Record<string, string>;
}

type QuoteState = "plain" | "double" | "single" | "ansi";

const MARK = "\u0000";

/** How a reference to `name` is written where the scanner stands. */
const REFERENCE: Record<QuoteState, (name: string) => string> = {
  plain: (name) => `"\${${name}}"`,
  double: (name) => `\${${name}}`,
  single: (name) => `'"\${${name}}"'`,
  ansi: (name) => `'"\${${name}}"$'`,
};

/**
 * Renders `source` over `data` by the quoting rule above.
 * @throws EngineError `template.invalid` / `template.render_failed` as the renderer does,
 *   `shell.unsafe_template` for a mustache after a backslash or a NUL in the template,
 *   `shell.invalid_value` for a value with a NUL, `shell.value_too_large` past the limits.
 */
export function renderShellCommand(source: string, data: unknown): RenderedCommand {
  if (source.includes(MARK)) {
    throw EngineError.terminal("shell.unsafe_template", "command_template contains a NUL character");
  }
  const values: string[] = [];
  let totalBytes = 0;
  const text = renderTemplate(source, data, {
    substitute: (value) => {
      if (value.includes(MARK)) {
        throw EngineError.terminal("shell.invalid_value", `value ${values.length} of command_template contains a NUL character, which no command can receive`);
      }
      const bytes = new TextEncoder().encode(value).length;
      totalBytes += bytes;
      if (bytes > MAX_SHELL_VALUE_BYTES || totalBytes > MAX_SHELL_VALUES_TOTAL_BYTES) {
        throw EngineError.terminal("shell.value_too_large", `the values of command_template are too large (one value may have ${MAX_SHELL_VALUE_BYTES} bytes, all together ${MAX_SHELL_VALUES_TOTAL_BYTES}); write large data to a file with the write_file tool and pass its path`);
      }
      if (values.length >= MAX_SHELL_VALUES) {
        throw EngineError.terminal("shell.value_too_large", `command_template renders more than ${MAX_SHELL_VALUES} values`);
      }
      values.push(value);
      return `${MARK}${values.length - 1}${MARK}`;
    },
  });
  const env: Record<string, string> = {};
  values.forEach((value, index) => {
    env[`${SHELL_VALUE_PREFIX}${index}`] = value;
  });
  return { command: placeReferences(text), env };
}

/** Replaces each value mark in `text` by a reference quoted for the quoting state it stands in. */
function placeReferences(text: string): string {
  let out = "";
  let state: QuoteState = "plain";
  // An unescaped `$` just before, outside quotes: `$'` opens an ANSI-C string.
  let dollar = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i] ?? "";
    if (ch === MARK) {
      const end = text.indexOf(MARK, i + 1);
      out += REFERENCE[state](`${SHELL_VALUE_PREFIX}${text.slice(i + 1, end)}`);
      i = end;
      dollar = false;
      continue;
    }
    if (ch === "\\" && state !== "single") {
      const next = text[i + 1];
      if (next === MARK) {
        throw EngineError.terminal("shell.unsafe_template", "a {{…}} right after a backslash in command_template: the backslash would escape the quoting of the value; remove it");
      }
      out += ch + (next ?? "");
      i += 1;
      dollar = false;
      continue;
    }
    out += ch;
    const before = state;
    state = nextState(state, ch, dollar);
    dollar = before === "plain" && ch === "$";
  }
  return out;
}

function nextState(state: QuoteState, ch: string, afterDollar: boolean): QuoteState {
  switch (state) {
    case "plain":
      if (ch === "'") {
        return afterDollar ? "ansi" : "single";
      }
      return ch === '"' ? "double" : "plain";
    case "double":
      return ch === '"' ? "plain" : "double";
    case "single":
    case "ansi":
      return ch === "'" ? "plain" : state;
  }
}
