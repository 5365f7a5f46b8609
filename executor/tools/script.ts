import type { SandboxExecResult } from "../../schemas/sandbox.ts";
import type { ToolContext } from "./types.ts";

/**
 * Runs a fixed bash script in the container with `args` as its positional
 * parameters (`$1`, `$2`, … and `"$@"`): values from the input reach the
 * script as data and are never parsed as shell text.
 */
export function runScript(
  context: ToolContext,
  script: string,
  args: readonly string[],
  options: { cwd?: string | undefined; env?: Record<string, string> | undefined; timeoutMs?: number | undefined } = {},
): Promise<SandboxExecResult> {
  return context.sandbox().exec({
    argv: ["bash", "-c", script, "trellis", ...args],
    timeout_ms: options.timeoutMs ?? context.defaultTimeoutMs,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.env === undefined ? {} : { env: options.env }),
  });
}

/** The command part of a result, as the command-running tools report it. */
export function commandFields(result: SandboxExecResult) {
  return {
    exit_code: result.exit_code,
    stdout: result.stdout,
    stderr: result.stderr,
    truncated: result.truncated,
    timed_out: result.timed_out,
    duration_ms: result.duration_ms,
  };
}

/** Values the scripts print as `trellis-<name>=<value>` lines, last one wins. */
export function markers(text: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const match = /^trellis-([a-z_]+)=(.*)$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) {
      found.set(match[1], [...(found.get(match[1]) ?? []), match[2]]);
    }
  }
  return found;
}

/** The end of a command's output, for error messages. */
export function tail(text: string, chars = 2_000): string {
  const trimmed = text.trimEnd();
  return trimmed.length > chars ? `…${trimmed.slice(-chars)}` : trimmed;
}
