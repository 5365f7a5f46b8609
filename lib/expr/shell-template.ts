/**
 * Renders a shell `command_template` so that values stay data. The contract, with every
 * place and flow, is docs/containers.md#the-quoting-rule; in short:
 *
 * 1. **A value never becomes command text.** What each `{{…}}` (and `{{{…}}}`) renders goes
 *    into an environment variable `TRELLIS_IN_<n>` (n in order of appearance) and the
 *    command text gets a reference to it, quoted for where the mustache stands
 *    ({@link REFERENCE}), so a value is always one word. Bash expands a variable after it
 *    has parsed the command and never parses the expansion again.
 * 2. **Where bash evaluates a variable's value, only a plain decimal integer may go**
 *    ({@link SHELL_INTEGER_PATTERN}, else `shell.unsafe_value`, before anything is sent):
 *    arithmetic, array subscripts, substring offsets, `[[ … -eq … ]]` operands, variable
 *    names, `let` / `eval` / `trap` / `bash -c`, `declare -i/-n/-a/-A` values; reached
 *    directly or through the command's own variables and the step's `env`. `shell-scan.ts`
 *    reads the command; where it cannot tell, it assumes bash evaluates.
 * 3. **Not covered** (the step's own logic): a value that reaches such a place through a
 *    program the command starts, a file, another pipe or a command's output, and programs
 *    that run their arguments as code (`ssh host {{x}}`, `su -c`, `python -c`, …).
 *
 * Also refused, as `shell.unsafe_template`: a mustache right after a backslash, a mustache
 * in a quoted heredoc (`<<'EOF'`), a NUL, the text `TRELLIS_IN_`, and an `env` entry that
 * bash runs as code ({@link SHELL_CODE_ENV_NAMES}) whose template renders a value.
 */
import { EngineError } from "../errors.ts";
import { MARK, scanShellCommand, type QuoteForm, type ShellScan } from "./shell-scan.ts";
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
/**
 * Longest command, in bytes: it runs as the one argument of `bash -c`, and
 * Linux refuses an argument longer than 128 KiB (MAX_ARG_STRLEN). Checked
 * before the command is read, which also bounds the reading's cost.
 */
export const MAX_SHELL_COMMAND_BYTES = 128 * 1024 - 64;
/** The only values that may stand where bash evaluates: plain decimal integers that fit 64 bits. */
export const SHELL_INTEGER_PATTERN = /^-?(?:0|[1-9][0-9]{0,17})$/;
/** Environment variables bash itself reads as code or options: their value may not come from a mustache. */
export const SHELL_CODE_ENV_NAMES: ReadonlySet<string> = new Set(
  "BASH_ENV ENV SHELLOPTS BASHOPTS PS0 PS1 PS2 PS3 PS4 PROMPT_COMMAND".split(" "),
);

/** A command ready to run: its text and the environment its references (and the step's `env`) expand. */
export interface RenderedCommand {
  command: string;
  env: Record<string, string>;
}

/** How a reference to `name` is written in each quoting form. */
const REFERENCE: Record<QuoteForm, (name: string) => string> = {
  plain: (name) => `"\${${name}}"`,
  double: (name) => `\${${name}}`,
  bare: (name) => `\${${name}}`,
  single: (name) => `'"\${${name}}"'`,
  ansi: (name) => `'"\${${name}}"$'`,
};

/**
 * Renders `source` over `data` by the rules above; `envTemplates` (the step's
 * `env`, Handlebars over the same data) are rendered into the environment.
 * @throws EngineError `template.invalid` / `template.render_failed` as the renderer does,
 *   `shell.unsafe_template` (see above), `shell.unsafe_value` for a value that is not a
 *   plain integer where bash evaluates it, `shell.invalid_value` for a value with a NUL,
 *   `shell.value_too_large` past the values' limits, `shell.command_too_large` for a
 *   command longer than {@link MAX_SHELL_COMMAND_BYTES}.
 */
export function renderShellCommand(
  source: string,
  data: unknown,
  envTemplates: Readonly<Record<string, string>> = {},
): RenderedCommand {
  if (source.includes(MARK)) {
    throw EngineError.terminal("shell.unsafe_template", "command_template contains a NUL character");
  }
  if (source.includes(SHELL_VALUE_PREFIX)) {
    throw EngineError.terminal(
      "shell.unsafe_template",
      `command_template names the engine's ${SHELL_VALUE_PREFIX}* variables: write {{…}} to use a value`,
    );
  }
  const values = renderValues(source, data);
  checkCommandSize(values.text);
  const scan = scanShellCommand(values.text, (index, form) => REFERENCE[form](`${SHELL_VALUE_PREFIX}${index}`));
  checkCommandSize(scan.command);
  const env = renderEnv(envTemplates, data);
  checkEvaluated(scan, values.values, env);
  const out = [
    ...Object.entries(env).map(([name, entry]) => [name, entry.value] as const),
    ...values.values.map((value, index) => [`${SHELL_VALUE_PREFIX}${index}`, value] as const),
  ];
  return { command: scan.command, env: Object.fromEntries(out) };
}

function checkCommandSize(command: string): void {
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long text needs counting.
  const bytes = command.length * 3 <= MAX_SHELL_COMMAND_BYTES ? 0 : new TextEncoder().encode(command).length;
  if (bytes > MAX_SHELL_COMMAND_BYTES) {
    throw EngineError.terminal(
      "shell.command_too_large",
      `the rendered command has ${bytes} bytes; bash -c takes at most ${MAX_SHELL_COMMAND_BYTES}: write a long script to a file with the write_file tool and run that`,
    );
  }
}

/** Renders the template with a mark in place of each value, and collects the values. */
function renderValues(source: string, data: unknown): { text: string; values: string[] } {
  const values: string[] = [];
  let totalBytes = 0;
  const text = renderTemplate(source, data, {
    strict: true,
    substitute: (value) => {
      if (value.includes(MARK)) {
        throw EngineError.terminal(
          "shell.invalid_value",
          `value ${values.length} of command_template contains a NUL character, which no command can receive`,
        );
      }
      const bytes = new TextEncoder().encode(value).length;
      totalBytes += bytes;
      if (bytes > MAX_SHELL_VALUE_BYTES || totalBytes > MAX_SHELL_VALUES_TOTAL_BYTES) {
        throw EngineError.terminal(
          "shell.value_too_large",
          `the values of command_template are too large (one value may have ${MAX_SHELL_VALUE_BYTES} bytes, all together ${MAX_SHELL_VALUES_TOTAL_BYTES}); write large data to a file with the write_file tool and pass its path`,
        );
      }
      if (values.length >= MAX_SHELL_VALUES) {
        throw EngineError.terminal(
          "shell.value_too_large",
          `command_template renders more than ${MAX_SHELL_VALUES} values`,
        );
      }
      values.push(value);
      return `${MARK}${values.length - 1}${MARK}`;
    },
  });
  return { text, values };
}

/** The step's `env`, rendered; `fromValue` says whether a mustache rendered into it. */
function renderEnv(
  templates: Readonly<Record<string, string>>,
  data: unknown,
): Record<string, { value: string; fromValue: boolean }> {
  const env: Record<string, { value: string; fromValue: boolean }> = {};
  for (const [name, template] of Object.entries(templates)) {
    let fromValue = false;
    const value = renderTemplate(template, data, {
      strict: true,
      substitute: (text) => {
        fromValue = true;
        return text;
      },
    });
    if (fromValue && SHELL_CODE_ENV_NAMES.has(name)) {
      throw EngineError.terminal(
        "shell.unsafe_template",
        `env.${name} is read by bash as code or options: its value may not come from a {{…}}`,
      );
    }
    env[name] = { value, fromValue };
  }
  return env;
}

/** Every value that reaches a place where bash evaluates must be a plain integer. */
function checkEvaluated(
  scan: ShellScan,
  values: readonly string[],
  env: Record<string, { value: string; fromValue: boolean }>,
): void {
  for (const [index, context] of scan.evaluated) {
    requireInteger(values[index] ?? "", `{{…}} number ${index + 1} of command_template`, context);
  }
  const seen = new Set<string>();
  const queue = [...scan.evaluatedNames];
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    const [name, context] = next;
    if (seen.has(name)) {
      continue;
    }
    seen.add(name);
    const through = `${context}, through ${name === "@" ? "the positional parameters" : `$${name}`}`;
    const entry = Object.hasOwn(env, name) ? env[name] : undefined;
    if (entry?.fromValue === true) {
      requireInteger(entry.value, `env.${name}`, through);
    }
    const flow = scan.flows.get(name);
    for (const index of flow?.marks ?? []) {
      requireInteger(values[index] ?? "", `{{…}} number ${index + 1} of command_template`, through);
    }
    for (const from of flow?.from ?? []) {
      queue.push([from, context]);
    }
  }
}

function requireInteger(value: string, what: string, context: string): void {
  if (SHELL_INTEGER_PATTERN.test(value)) {
    return;
  }
  const excerpt = JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  throw EngineError.terminal(
    "shell.unsafe_value",
    `${what} (${excerpt}) reaches a place where bash evaluates it: ${context}. Only a plain decimal integer (like 42 or -7: no sign +, leading zeros or spaces) may go there. ` +
      'Declare the input an integer ("requires": { "type": "integer" }) to refuse other values sooner, or use the value as data: ' +
      "compare strings with [[ {{x}} == … ]], compare numbers with [ {{x}} -gt … ] (test does not evaluate its operands), and keep values out of arithmetic, subscripts, variable names, let, eval and declare -i.",
  );
}
