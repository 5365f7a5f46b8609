import { describe, it } from "vitest";
import { MAX_SHELL_VALUE_BYTES, renderShellCommand } from "../../lib/expr/shell-template.ts";

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
    const rendered = renderShellCommand("git add {{#each files}}{{this}} {{/each}}&& echo {{json meta}} {{uppercase name}}", {
      files: ["a b.txt", "c;d"],
      meta: { n: 1 },
      name: "x",
    });
    expect(rendered.command).toBe('git add "${TRELLIS_IN_0}" "${TRELLIS_IN_1}" && echo "${TRELLIS_IN_2}" "${TRELLIS_IN_3}"');
    expect(rendered.env).toEqual({ TRELLIS_IN_0: "a b.txt", TRELLIS_IN_1: "c;d", TRELLIS_IN_2: '{"n":1}', TRELLIS_IN_3: "X" });
  });

  it("leaves a template without mustaches as it is", ({ expect }) => {
    expect(renderShellCommand("echo 'a' \"b\" $HOME", {})).toEqual({ command: "echo 'a' \"b\" $HOME", env: {} });
  });

  it("refuses a mustache right after a backslash (Handlebars reads a single one as an escaped mustache)", ({ expect }) => {
    expect(() => renderShellCommand("echo \\\\{{x}}", { x: "v" })).toThrow(expect.objectContaining({ code: "shell.unsafe_template" }));
    expect(renderShellCommand("echo \\{{x}}", { x: "v" })).toEqual({ command: "echo {{x}}", env: {} });
  });

  it("refuses a value no command can receive", ({ expect }) => {
    expect(() => renderShellCommand("echo {{x}}", { x: "a\u0000b" })).toThrow(expect.objectContaining({ code: "shell.invalid_value" }));
    expect(() => renderShellCommand("echo {{x}}", { x: "x".repeat(MAX_SHELL_VALUE_BYTES + 1) })).toThrow(expect.objectContaining({ code: "shell.value_too_large" }));
  });
});
