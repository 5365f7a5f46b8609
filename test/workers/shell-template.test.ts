import { describe, it } from "vitest";
import { MAX_SHELL_NESTING } from "../../lib/expr/shell-scan.ts";
import { MAX_SHELL_COMMAND_BYTES, MAX_SHELL_VALUE_BYTES, renderShellCommand } from "../../lib/expr/shell-template.ts";

describe("renderShellCommand: the quoting rule", () => {
  it.for([
    ["unquoted", "echo {{x}}", 'echo "${TRELLIS_IN_0}"'],
    ["inside double quotes", 'echo "hi {{x}}!"', 'echo "hi ${TRELLIS_IN_0}!"'],
    ["inside single quotes", "echo 'hi {{x}}!'", `echo 'hi '"\${TRELLIS_IN_0}"'!'`],
    ["inside $'…' quotes", "echo $'hi {{x}}\\n'", `echo $'hi '"\${TRELLIS_IN_0}"$'\\n'`],
    ["after an escaped quote", 'echo \\" {{x}}', 'echo \\" "${TRELLIS_IN_0}"'],
    ["an escaped dollar before single quotes", "echo \\$'{{x}}'", `echo \\$''"\${TRELLIS_IN_0}"''`],
    ["as part of a word", "git checkout -b feature/{{x}}", 'git checkout -b feature/"${TRELLIS_IN_0}"'],
    ["in triple-stash", "echo {{{x}}}", 'echo "${TRELLIS_IN_0}"'],
  ] as const)("writes a reference %s", ([, template, command], { expect }) => {
    expect(renderShellCommand(template, { x: "v" })).toEqual({ command, env: { TRELLIS_IN_0: "v" } });
  });

  it("keeps a value with shell syntax out of the command text entirely", ({ expect }) => {
    const value = `'; rm -rf / ; echo "$(whoami)" \`id\` \\ \n $HOME`;
    const rendered = renderShellCommand("printf '%s' {{x}} && echo \"{{x}}\" && echo '{{x}}'", { x: value });
    expect(rendered.command).not.toContain("rm -rf");
    expect(rendered.command).not.toContain("whoami");
    expect(Object.values(rendered.env)).toEqual([value, value, value]);
  });

  it("gives each mustache its own variable, in order, through blocks and helpers", ({ expect }) => {
    const rendered = renderShellCommand(
      "git add {{#each files}}{{this}} {{/each}}&& echo {{json meta}} {{uppercase name}}",
      {
        files: ["a b.txt", "c;d"],
        meta: { n: 1 },
        name: "x",
      },
    );
    expect(rendered.command).toBe(
      'git add "${TRELLIS_IN_0}" "${TRELLIS_IN_1}" && echo "${TRELLIS_IN_2}" "${TRELLIS_IN_3}"',
    );
    expect(rendered.env).toEqual({
      TRELLIS_IN_0: "a b.txt",
      TRELLIS_IN_1: "c;d",
      TRELLIS_IN_2: '{"n":1}',
      TRELLIS_IN_3: "X",
    });
  });

  it("leaves a template without mustaches as it is", ({ expect }) => {
    expect(renderShellCommand("echo 'a' \"b\" $HOME", {})).toEqual({ command: "echo 'a' \"b\" $HOME", env: {} });
  });

  it("refuses a mustache right after a backslash (Handlebars reads a single one as an escaped mustache)", ({
    expect,
  }) => {
    expect(() => renderShellCommand("echo \\\\{{x}}", { x: "v" })).toThrow(
      expect.objectContaining({ code: "shell.unsafe_template" }),
    );
    expect(renderShellCommand("echo \\{{x}}", { x: "v" })).toEqual({ command: "echo {{x}}", env: {} });
  });

  it("refuses a value no command can receive", ({ expect }) => {
    expect(() => renderShellCommand("echo {{x}}", { x: "a\u0000b" })).toThrow(
      expect.objectContaining({ code: "shell.invalid_value" }),
    );
    expect(() => renderShellCommand("echo {{x}}", { x: "x".repeat(MAX_SHELL_VALUE_BYTES + 1) })).toThrow(
      expect.objectContaining({ code: "shell.value_too_large" }),
    );
  });
});

describe("renderShellCommand: values where bash evaluates text", () => {
  const HOSTILE = "a[$(touch PWNED)]";

  it.for([
    ["arithmetic", "echo $(( {{n}} + 1 ))", "echo $(( ${TRELLIS_IN_0} + 1 ))"],
    ["arithmetic inside double quotes", 'echo "$(( {{n}} ))"', 'echo "$(( ${TRELLIS_IN_0} ))"'],
    ["$[ ]", "echo $[ {{n}} ]", "echo $[ ${TRELLIS_IN_0} ]"],
    ["(( ))", "(( {{n}} > 1 ))", "(( ${TRELLIS_IN_0} > 1 ))"],
    ["a subscript", "a[{{n}}]=1; echo ${a[{{n}}]}", "a[${TRELLIS_IN_0}]=1; echo ${a[${TRELLIS_IN_1}]}"],
    ["a substring offset", "echo ${s:{{n}}:2}", "echo ${s:${TRELLIS_IN_0}:2}"],
    ["a [[ -gt ]] operand", "[[ {{n}} -gt 1 ]]", '[[ "${TRELLIS_IN_0}" -gt 1 ]]'],
  ] as const)("writes a reference in %s and lets an integer through", ([, template, command], { expect }) => {
    const rendered = renderShellCommand(template, { n: "2" });
    expect(rendered.command).toBe(command);
    expect(Object.values(rendered.env).every((value) => value === "2")).toBe(true);
  });

  it.for([
    ["$(( ))", "echo $(( {{n}} + 1 ))", "arithmetic $(( ))"],
    ["$[ ]", "echo $[ {{n}} ]", "arithmetic $[ ]"],
    ["(( ))", "if (( {{n}} )); then :; fi", "arithmetic (( ))"],
    ["[[ -eq ]]", "[[ 1 -eq {{n}} ]]", "an operand of [[ … -eq/-ne/-lt/-le/-gt/-ge … ]]"],
    ["[[ -v ]]", "[[ -v {{n}} ]]", "a variable name ([[ -v … ]])"],
    ["${arr[…]}", "echo ${a[{{n}}]}", "an array subscript ${name[…]}"],
    ["${var:offset:length}", "echo ${s:0:{{n}}{{!}}}", "a substring offset or length ${var:…}"],
    ["arr[…]=", "a[{{n}}]=x", "an array subscript name[…]"],
    ["let", "let x={{n}}", "let"],
    ["declare -i", "declare -i x={{n}}", "a variable name or value (declare -i)"],
    ["local -i", "f() { local -i x={{n}}; }", "a variable name or value (local -i)"],
    ["printf -v", "printf -v {{n}} x", "a variable name (printf -v)"],
    ["an assigned variable", "x={{n}}; echo $((x))", "arithmetic $(( )), through $x"],
    [
      "the positional parameters",
      "set -- {{n}}; echo $(( $1 ))",
      "arithmetic $(( )), through the positional parameters",
    ],
  ] as const)(
    "refuses a hostile value in %s with shell.unsafe_value, naming the place",
    ([, template, context], { expect }) => {
      expect(() => renderShellCommand(template, { n: HOSTILE })).toThrow(
        expect.objectContaining({
          code: "shell.unsafe_value",
          retryable: false,
          message: expect.stringContaining(`reaches a place where bash evaluates it: ${context}.`),
        }),
      );
    },
  );

  it("checks an env entry that reaches arithmetic, and only one that renders a value", ({ expect }) => {
    expect(() => renderShellCommand("echo $(( N + 1 ))", { n: HOSTILE }, { N: "{{n}}" })).toThrow(
      expect.objectContaining({ code: "shell.unsafe_value", message: expect.stringContaining("env.N") }),
    );
    expect(renderShellCommand("echo $(( N + 1 ))", { n: "4" }, { N: "{{n}}" }).env).toEqual({ N: "4" });
    expect(renderShellCommand("echo $(( N + 1 ))", {}, { N: "x" }).env).toEqual({ N: "x" });
    expect(renderShellCommand('echo "$N"', { n: HOSTILE }, { N: "{{n}}" }).env).toEqual({ N: HOSTILE });
  });

  it("leaves data places alone: arguments, quotes, [[ == ]], test's -gt, assignment values", ({ expect }) => {
    const template = `printf '%s' {{n}} "{{n}}" '{{n}}'; [[ {{n}} == x ]]; [ {{n}} -gt 1 ]; x={{n}}; echo "$x"; arr=({{n}}); read -r v <<< {{n}}`;
    expect(Object.keys(renderShellCommand(template, { n: HOSTILE }).env)).toHaveLength(8);
  });

  it("refuses templates that reach the engine's variables or bash's code variables, and quoted heredocs", ({
    expect,
  }) => {
    expect(() => renderShellCommand("echo $(( TRELLIS_IN_0 ))", {})).toThrow(
      expect.objectContaining({ code: "shell.unsafe_template" }),
    );
    expect(() => renderShellCommand("cat <<'EOF'\n{{n}}\nEOF", { n: "1" })).toThrow(
      expect.objectContaining({ code: "shell.unsafe_template" }),
    );
    expect(() => renderShellCommand("true", { n: "x" }, { BASH_ENV: "{{n}}" })).toThrow(
      expect.objectContaining({ code: "shell.unsafe_template" }),
    );
    expect(renderShellCommand("true", {}, { BASH_ENV: "/etc/profile" }).env).toEqual({ BASH_ENV: "/etc/profile" });
  });

  it("keeps unquoted heredoc bodies, comments and nested commands readable", ({ expect }) => {
    expect(renderShellCommand("cat <<EOF\nhi {{n}}\nEOF\necho {{n}} # {{n}}", { n: "v" }).command).toBe(
      'cat <<EOF\nhi ${TRELLIS_IN_0}\nEOF\necho "${TRELLIS_IN_1}" # "${TRELLIS_IN_2}"',
    );
    expect(renderShellCommand('echo "$(printf %s {{n}})" `echo {{n}}`', { n: "v" }).command).toBe(
      'echo "$(printf %s "${TRELLIS_IN_0}")" `echo "${TRELLIS_IN_1}"`',
    );
  });
});

describe("renderShellCommand: bounds", () => {
  it("refuses a command longer than bash -c can take, before reading it", ({ expect }) => {
    const long = `echo ${"$x ".repeat(MAX_SHELL_COMMAND_BYTES / 3 + 1)}`;
    expect(() => renderShellCommand(long, {})).toThrow(expect.objectContaining({ code: "shell.command_too_large" }));
    expect(renderShellCommand(`echo ${"x".repeat(MAX_SHELL_COMMAND_BYTES - 10)}`, {}).command).toHaveLength(
      MAX_SHELL_COMMAND_BYTES - 5,
    );
  });

  it("refuses text nested deeper than it reads, instead of overflowing the stack", ({ expect }) => {
    expect(() =>
      renderShellCommand(`${"$(".repeat(MAX_SHELL_NESTING + 1)}{{x}}${")".repeat(MAX_SHELL_NESTING + 1)}`, { x: "1" }),
    ).toThrow(expect.objectContaining({ code: "shell.unsafe_template" }));
    expect(renderShellCommand(`echo ${"$(".repeat(50)}echo {{x}}${")".repeat(50)}`, { x: "1" }).env).toEqual({
      TRELLIS_IN_0: "1",
    });
  });
});
