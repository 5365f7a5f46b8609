import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "vitest";
import { renderShellCommand } from "../../lib/expr/shell-template.ts";

/**
 * Shell values are data, checked against the real bash: a value that would run
 * code where bash evaluates text never reaches it (the render refuses it), and
 * in every other place it arrives byte for byte and runs nothing.
 *
 * Each evaluating context is shown to be real first: the command rendered with
 * a harmless integer, run with the hostile value put into its variables by
 * hand (what the renderer used to do), does run `touch PWNED`.
 */

const HOSTILE = "a[$(touch PWNED)]";
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "trellis-shell-values-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function bash(command: string, env: Record<string, string>): { stdout: string; status: number | null } {
  const result = spawnSync("/bin/bash", ["-c", command], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
    timeout: 10_000,
  });
  return { stdout: result.stdout, status: result.status };
}

const pwned = () => existsSync(join(dir, "PWNED"));

/** The rendered environment with every value variable replaced by `value`. */
function withValue(env: Record<string, string>, value: string, names: readonly string[] = []): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).map(([name, current]) => [
      name,
      name.startsWith("TRELLIS_IN_") || names.includes(name) ? value : current,
    ]),
  );
}

interface Evaluating {
  template: string;
  /** A harmless value and what the command prints with it, when one exists (a variable name has none). */
  safe?: [string, string];
  env?: Record<string, string>;
  hostile?: string;
}

const EVALUATING: [string, Evaluating][] = [
  ["$(( ))", { template: "echo $(( {{n}} + 1 ))", safe: ["2", "3\n"] }],
  ["$(( )) inside double quotes", { template: 'echo "$(( {{n}} + 1 ))"', safe: ["2", "3\n"] }],
  ["$[ ]", { template: "echo $[ {{n}} + 1 ]", safe: ["2", "3\n"] }],
  ["(( ))", { template: "(( {{n}} > 1 )) && echo big", safe: ["2", "big\n"] }],
  ["for (( ))", { template: "for (( i = 0; i < {{n}}; i++ )); do printf %s $i; done", safe: ["2", "01"] }],
  ["[[ -eq ]]", { template: "[[ {{n}} -eq 2 ]] && echo yes", safe: ["2", "yes\n"] }],
  ["[[ -ne ]]", { template: "[[ 3 -ne {{n}} ]] && echo yes", safe: ["2", "yes\n"] }],
  ["[[ -lt ]]", { template: "[[ {{n}} -lt 3 ]] && echo yes", safe: ["2", "yes\n"] }],
  ["[[ -le ]]", { template: "[[ {{n}} -le 2 ]] && echo yes", safe: ["2", "yes\n"] }],
  ["[[ -gt ]]", { template: "if [[ {{n}} -gt 1 ]]; then echo yes; fi", safe: ["2", "yes\n"] }],
  ["[[ -ge ]]", { template: '[[ "{{n}}" -ge 2 ]] && echo yes', safe: ["2", "yes\n"] }],
  ["[[ -v ]]", { template: "[[ -v {{n}} ]] || echo unset" }],
  ["test -v", { template: "test -v {{n}} || echo unset" }],
  ["${arr[…]}", { template: "a=(x y z); echo ${a[{{n}}]}", safe: ["2", "z\n"] }],
  ['"${arr[…]}"', { template: 'a=(x y z); echo "${a[{{n}}]}"', safe: ["2", "z\n"] }],
  ["${#arr[…]}", { template: "a=(x y zz); echo ${#a[{{n}}]}", safe: ["2", "2\n"] }],
  ["${var:offset}", { template: "s=abcdef; echo ${s:{{n}}{{!}}}", safe: ["2", "cdef\n"] }],
  ["${var:offset:length}", { template: "s=abcdef; echo ${s:1:{{n}}{{!}}}", safe: ["2", "bc\n"] }],
  ["let", { template: 'let "r = {{n}} * 2"; echo $r', safe: ["2", "4\n"] }],
  ["let without quotes", { template: "let r={{n}}; echo $r", safe: ["2", "2\n"] }],
  ["declare -i", { template: "declare -i r={{n}}; echo $r", safe: ["2", "2\n"] }],
  ["local -i", { template: "f() { local -i r={{n}}; echo $r; }; f", safe: ["2", "2\n"] }],
  ["an assignment to a declare -i variable", { template: "declare -i r; r={{n}}; echo $r", safe: ["2", "2\n"] }],
  ["arr[…]=", { template: "a=(); a[{{n}}]=v; echo ${a[2]}", safe: ["2", "v\n"] }],
  ["([…]=…)", { template: "a=([{{n}}]=v); echo ${a[2]}", safe: ["2", "v\n"] }],
  ["${!…} of a variable assigned from a value", { template: "x={{n}}; echo ${!x}" }],
  ["printf -v", { template: "printf -v {{n}} %s x" }],
  ["read", { template: "read {{n}} <<< x" }],
  ["declare NAME", { template: "declare {{n}}", hostile: "a[$(touch PWNED)]=1" }],
  ["declare -a with a quoted (…) value", { template: "declare -a r={{n}}", hostile: "($(touch PWNED))" }],
  ["eval", { template: "eval echo {{n}}", safe: ["2", "2\n"], hostile: "$(touch PWNED)" }],
  ["trap", { template: "trap {{n}} EXIT", hostile: "touch PWNED" }],
  ["bash -c", { template: "bash -c {{n}}", hostile: "touch PWNED" }],
  ["bash -c on a continued line", { template: "FOO=1 \\\n  bash -c {{n}}", hostile: "touch PWNED" }],
  ["let on a continued line", { template: 'FOO=1 \\\n  let "r = {{n}} * 2"; echo $r', safe: ["2", "4\n"] }],
  ["a variable assigned from a value", { template: "x={{n}}; echo $(( x * 2 ))", safe: ["2", "4\n"] }],
  [
    "a variable copied from one assigned from a value",
    { template: 'x={{n}}; y="$x"; (( y > 1 )) && echo big', safe: ["2", "big\n"] },
  ],
  ["a local variable", { template: "f() { local x={{n}}; echo $(( x + 1 )); }; f", safe: ["2", "3\n"] }],
  ["a for loop variable", { template: "for x in {{n}}; do echo $(( x + 1 )); done", safe: ["2", "3\n"] }],
  ["read from a here-string", { template: "read x <<< {{n}}; echo $(( x + 1 ))", safe: ["2", "3\n"] }],
  ["read from echo", { template: "echo {{n}} | { read x; echo $(( x + 1 )); }", safe: ["2", "3\n"] }],
  ["set --", { template: "set -- {{n}}; echo $(( $1 + 1 ))", safe: ["2", "3\n"] }],
  ["a function's argument", { template: 'inc() { echo $(( $1 + 1 )); }\ninc "{{n}}"', safe: ["2", "3\n"] }],
  ["a heredoc body", { template: "cat <<EOF\n$(( {{n}} + 1 ))\nEOF", safe: ["2", "3\n"] }],
  ["an env entry", { template: "echo $(( N + 1 ))", env: { N: "{{n}}" }, safe: ["2", "3\n"] }],
];

describe("a value where bash evaluates text (real bash)", () => {
  it.for(EVALUATING)("%s: the render refuses a hostile value, which would run code there", ([, test], { expect }) => {
    const hostile = test.hostile ?? HOSTILE;
    const envNames = Object.keys(test.env ?? {});
    expect(() => renderShellCommand(test.template, { n: hostile }, test.env)).toThrow(
      expect.objectContaining({ code: "shell.unsafe_value", retryable: false }),
    );

    // The context is real: with the hostile value put into the variables by hand, bash runs `touch`.
    const rendered = renderShellCommand(test.template, { n: "1" }, test.env);
    bash(rendered.command, withValue(rendered.env, hostile, envNames));
    expect(pwned()).toBe(true);
  });

  it.for(EVALUATING.filter(([, test]) => test.safe !== undefined))(
    "%s: a plain integer passes and works",
    ([, test], { expect }) => {
      const [value, printed] = test.safe ?? ["", ""];
      const rendered = renderShellCommand(test.template, { n: value }, test.env);
      expect(bash(rendered.command, rendered.env).stdout).toBe(printed);
    },
  );

  it.for(["-7", "0", "123456789012345678"])("lets the integer %s through", (value, { expect }) => {
    expect(renderShellCommand("echo $(( {{n}} ))", { n: value }).env.TRELLIS_IN_0).toBe(value);
  });

  it.for(["+1", "007", " 1", "1 ", "1e3", "0x10", "1.5", "", "1234567890123456789", "--1"])(
    "refuses %j, which is not a plain decimal integer",
    (value, { expect }) => {
      expect(() => renderShellCommand("echo $(( {{n}} ))", { n: value })).toThrow(
        expect.objectContaining({ code: "shell.unsafe_value" }),
      );
    },
  );

  it("says how to write it safely", ({ expect }) => {
    expect(() => renderShellCommand("[[ {{n}} -gt 3 ]]", { n: HOSTILE })).toThrow(
      /only a plain decimal integer.*\[\[ \{\{x\}\} == … \]\].*\[ \{\{x\}\} -gt … \]/is,
    );
  });
});

const SAFE: [string, string, string][] = [
  ["plain arguments", "printf '%s|' {{x}} {{x}}", `${HOSTILE}|${HOSTILE}|`],
  ["double quotes", 'printf "%s|" "{{x}}" "<{{x}}>"', `${HOSTILE}|<${HOSTILE}>|`],
  ["single quotes", "printf '%s|' '{{x}}' 'a {{x}} b'", `${HOSTILE}|a ${HOSTILE} b|`],
  ["$'…' quotes", "printf '%s|' $'{{x}}\\t'", `${HOSTILE}\t|`],
  ["[[ == ]]", '[[ {{x}} == "{{x}}" ]] && echo same', "same\n"],
  ["[[ -n ]] and [[ -f ]]", "[[ -n {{x}} && ! -f {{x}} ]] && echo yes", "yes\n"],
  ["[ -gt ] (test does not evaluate)", "[ {{x}} -gt 3 ] 2>/dev/null || echo refused", "refused\n"],
  ["an assignment then a quoted use", 'x={{x}}; echo "$x"', `${HOSTILE}\n`],
  ["a heredoc", "cat <<EOF\n<{{x}}>\nEOF", `<${HOSTILE}>\n`],
  ["the word of ${y:-…}", 'echo ${y:-{{x}}{{!}}} "${y:-{{x}}{{!}}}"', `${HOSTILE} ${HOSTILE}\n`],
  ["an array's elements", 'arr=({{x}} b); echo "${arr[0]}"', `${HOSTILE}\n`],
  ["an associative array's value", 'declare -A m; m[k]={{x}}; echo "${m[k]}"', `${HOSTILE}\n`],
  ["read from a here-string, quoted after", 'read -r v <<< {{x}}; echo "$v"', `${HOSTILE}\n`],
  ["case", "case {{x}} in *touch*) echo matched;; esac", "matched\n"],
  ["a command substitution", 'echo "$(printf %s {{x}})"', `${HOSTILE}\n`],
  ["a comment", "echo ok # {{x}}", "ok\n"],
  ["an env entry", 'echo "$V"', `${HOSTILE}\n`],
  ["the length of an array in [[ -gt ]]", "files=({{x}} b); [[ ${#files[@]} -gt 1 ]] && echo two", "two\n"],
  ["the length of a variable in arithmetic", "x={{x}}; echo $(( ${#x} ))", `${HOSTILE.length}\n`],
  ["the keys of an array", 'a=({{x}}); echo "${!a[@]}"', "0\n"],
];

describe("a value used as data (real bash)", () => {
  it.for(SAFE)("%s: arrives as it is and runs nothing", ([, template, printed], { expect }) => {
    const rendered = renderShellCommand(template, { x: HOSTILE }, template.includes("$V") ? { V: "{{x}}" } : {});
    expect(bash(rendered.command, rendered.env).stdout).toBe(printed);
    expect(pwned()).toBe(false);
  });

  it("keeps quotes, newlines and command syntax in a value as data", ({ expect }) => {
    const value = `'; touch PWNED; echo "$(touch PWNED)" \`touch PWNED\` \\ \n $HOME ${HOSTILE}`;
    const rendered = renderShellCommand("printf '%s|' {{x}} \"{{x}}\" '{{x}}'", { x: value });
    expect(bash(rendered.command, rendered.env).stdout).toBe(`${value}|${value}|${value}|`);
    expect(pwned()).toBe(false);
  });
});
