import { EngineError } from "../../lib/errors.ts";
import type { SandboxExecResult } from "../../schemas/sandbox.ts";
import type { ToolInput, ToolOutput } from "../../schemas/tools.ts";
import { commandFields, runScript } from "./script.ts";
import type { Tool, ToolContext } from "./types.ts";

/** Detected commands announce themselves on stderr as `trellis: running <command>`. */
const ANNOUNCE = /^trellis: running (.+)$/m;

/**
 * How run_tests, run_lint and run_build find a project's command when the
 * input gives none, first match wins: `[file test, command]`. Shell text is
 * fixed here; the input's `args` follow as `"$@"`.
 */
const DETECTION = {
  test: [
    ["[ -f package.json ]", "npm test --"],
    ["[ -f Makefile ] && grep -q '^test:' Makefile", "make test"],
    [
      "[ -f pyproject.toml ] || [ -f setup.py ] || [ -f setup.cfg ] || [ -f pytest.ini ] || [ -d tests ]",
      "python3 -m pytest",
    ],
    ["[ -f Cargo.toml ]", "cargo test"],
    ["[ -f go.mod ]", "go test ./..."],
  ],
  lint: [
    ["[ -f package.json ]", "npm run lint --"],
    ["[ -f Makefile ] && grep -q '^lint:' Makefile", "make lint"],
    ["[ -f pyproject.toml ] || [ -f setup.py ] || [ -f setup.cfg ]", "python3 -m ruff check ."],
    ["[ -f Cargo.toml ]", "cargo clippy"],
    ["[ -f go.mod ]", "go vet ./..."],
  ],
  build: [
    ["[ -f package.json ]", "npm run build --"],
    ["[ -f Makefile ] && grep -q '^build:' Makefile", "make build"],
    ["[ -f Makefile ]", "make"],
    ["[ -f pyproject.toml ] || [ -f setup.py ]", "python3 -m build"],
    ["[ -f Cargo.toml ]", "cargo build"],
    ["[ -f go.mod ]", "go build ./..."],
  ],
} as const satisfies Record<string, readonly (readonly [string, string])[]>;

type ProjectTask = keyof typeof DETECTION;

/** The script that runs the detected command for `task`, or says none was found (exit 127). */
export function detectionScript(task: ProjectTask): string {
  const lines = DETECTION[task].map(
    ([test, command]) => `if ${test}; then printf 'trellis: running %s\\n' '${command}' >&2; exec ${command} "$@"; fi`,
  );
  const known = DETECTION[task].map(([, command]) => command.replace(/ --$/, "")).join(", ");
  return [
    ...lines,
    `printf 'trellis: no ${task} command found (tried: ${known}); pass "command"\\n' >&2`,
    "exit 127",
  ].join("\n");
}

function projectTool(task: ProjectTask): Tool<"run_tests" | "run_lint" | "run_build"> {
  return {
    async run(input: ToolInput<"run_tests">, context: ToolContext): Promise<ToolOutput<"run_tests">> {
      const script = input.command === undefined ? detectionScript(task) : `${input.command} "$@"`;
      const result = await runScript(context, script, input.args ?? [], {
        cwd: input.working_dir,
        env: input.env,
        timeoutMs: input.timeout_ms,
      });
      const command = input.command ?? ANNOUNCE.exec(result.stderr)?.[1] ?? "(none found)";
      return { passed: result.exit_code === 0 && !result.timed_out, command, ...commandFields(result) };
    },
  };
}

export const runTestsTool: Tool<"run_tests"> = projectTool("test");
export const runLintTool: Tool<"run_lint"> = projectTool("lint");
export const runBuildTool: Tool<"run_build"> = projectTool("build");

/** Picks the manager from the project's files when the input names none; prints `trellis-manager=…`. */
const CHOOSE_MANAGER = `manager="$1"; shift
if [ -z "$manager" ]; then
  if [ -f package.json ]; then manager=npm
  elif [ -f pyproject.toml ] || [ -f requirements.txt ] || [ -f setup.py ]; then manager=pip
  else manager=npm; fi
fi
printf 'trellis-manager=%s\\n' "$manager"
# pip installs into the project's .venv (the image's system Python is externally managed).
venv() { [ -x .venv/bin/pip ] || python3 -m venv .venv || exit $?; }
`;

const INSTALL_SCRIPT = `${CHOOSE_MANAGER}dev="$1"; shift
case "$manager" in
  npm) if [ "$dev" = 1 ]; then exec npm install --save-dev -- "$@"; else exec npm install -- "$@"; fi ;;
  pip) venv; exec .venv/bin/pip install -- "$@" ;;
esac
`;

const UPDATE_SCRIPT = `${CHOOSE_MANAGER}case "$manager" in
  npm) exec npm update -- "$@" ;;
  pip) venv
       if [ "$#" -gt 0 ]; then exec .venv/bin/pip install --upgrade -- "$@"; fi
       if [ -f requirements.txt ]; then exec .venv/bin/pip install --upgrade -r requirements.txt; fi
       echo "update_dependencies: name the packages, or add a requirements.txt" >&2; exit 2 ;;
esac
`;

function managerOf(result: SandboxExecResult, fallback: "npm" | "pip" | undefined): "npm" | "pip" {
  const found = /^trellis-manager=(npm|pip)$/m.exec(result.stdout)?.[1];
  return found === "npm" || found === "pip" ? found : (fallback ?? "npm");
}

export const installPackagesTool: Tool<"install_packages"> = {
  async run(input, context) {
    const args = [input.manager ?? "", input.dev === true ? "1" : "0", ...input.packages];
    const result = await runScript(context, INSTALL_SCRIPT, args, {
      cwd: input.working_dir,
      timeoutMs: input.timeout_ms,
    });
    if (result.timed_out) {
      throw EngineError.retryable(
        "tool.timeout",
        `installing ${input.packages.join(" ")} timed out after ${result.duration_ms} ms`,
      );
    }
    if (result.exit_code !== 0) {
      throw EngineError.terminal(
        "tool.install_failed",
        `installing ${input.packages.join(" ")} failed (exit ${result.exit_code ?? "by signal"}): ${result.stderr.trimEnd().slice(-2_000)}`,
      );
    }
    return { manager: managerOf(result, input.manager), packages: input.packages, ...commandFields(result) };
  },
};

export const updateDependenciesTool: Tool<"update_dependencies"> = {
  async run(input, context) {
    const args = [input.manager ?? "", ...(input.packages ?? [])];
    const result = await runScript(context, UPDATE_SCRIPT, args, {
      cwd: input.working_dir,
      timeoutMs: input.timeout_ms,
    });
    if (result.timed_out) {
      throw EngineError.retryable("tool.timeout", `updating dependencies timed out after ${result.duration_ms} ms`);
    }
    if (result.exit_code !== 0) {
      throw EngineError.terminal(
        "tool.update_failed",
        `updating dependencies failed (exit ${result.exit_code ?? "by signal"}): ${result.stderr.trimEnd().slice(-2_000)}`,
      );
    }
    return { manager: managerOf(result, input.manager), ...commandFields(result) };
  },
};
