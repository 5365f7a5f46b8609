import { EngineError } from "../../lib/errors.ts";
import { renderShellCommand } from "../../lib/expr/shell-template.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import type { Json } from "../../schemas/common.ts";
import type { SandboxExecResult } from "../../schemas/sandbox.ts";
import { sandboxFor } from "../sandbox-client.ts";
import type { ActionHandler } from "./types.ts";

/** The action timeout the executor applies when an action sets none (executor/invoke.ts). */
const ACTION_TIMEOUT_DEFAULT_MS = 30_000;
/** How much of a failed command's stderr the error message quotes (its end). */
export const STDERR_TAIL_CHARS = 2_000;

/**
 * `shell`: runs `command_template` in the run's container (the one bound to
 * `resource_name`, default `container`), rendered by the quoting rule of
 * lib/expr/shell-template.ts: values travel as environment variables, never as
 * command text, and only a plain integer may reach a place where bash
 * evaluates text (`shell.unsafe_value`, checked before the command is sent).
 * Output `{ stdout, stderr, exit_code, truncated, timed_out, stdout_bytes,
 * stderr_bytes, duration_ms }`.
 *
 * Failures: past its timeout the command's process group is killed and the
 * step fails with `shell.timeout` (retryable, like any timeout); an exit code
 * outside `ok_exit_codes` (default `[0]`) fails it with `shell.exit_nonzero`
 * (not retryable, the end of stderr in the message) unless `allow_nonzero_exit`.
 */
export const shellAction: ActionHandler<"shell"> = {
  async run(action, input, context) {
    const implementation = action.implementation;
    const rendered = renderShellCommand(implementation.command_template, input, implementation.env);
    const cwd =
      implementation.working_dir === undefined
        ? ""
        : renderTemplate(implementation.working_dir, input, { strict: true }).trim();
    const sandbox = sandboxFor(context, implementation.resource_name);
    // The template, not the rendered command: values stay out of the record as they stay out of the command text.
    context.note?.({ command_template: implementation.command_template });
    const result = await sandbox.exec({
      command: rendered.command,
      env: rendered.env,
      timeout_ms: implementation.timeout_ms ?? commandTimeoutMs(action.execution?.timeout_ms),
      ...(cwd === "" ? {} : { cwd }),
      ...(implementation.max_output_bytes === undefined ? {} : { max_output_bytes: implementation.max_output_bytes }),
    });
    const output = toOutput(result);
    context.note?.({
      exit_code: result.exit_code,
      duration_ms: result.duration_ms,
      stdout_bytes: result.stdout_bytes,
      stderr_bytes: result.stderr_bytes,
      ...(result.timed_out ? { timed_out: true } : {}),
    });
    if (result.timed_out) {
      throw EngineError.retryable(
        "shell.timeout",
        `the command was killed after ${result.duration_ms} ms (timeout)${stderrTail(result)}`,
      );
    }
    const okCodes = implementation.ok_exit_codes ?? [0];
    const ok = result.exit_code !== null && okCodes.includes(result.exit_code);
    if (!ok && implementation.allow_nonzero_exit !== true) {
      const how =
        result.exit_code === null ? `was killed by ${result.signal ?? "a signal"}` : `exited with ${result.exit_code}`;
      throw EngineError.terminal("shell.exit_nonzero", `the command ${how}${stderrTail(result)}`);
    }
    return output;
  },
};

/** The command's own bound: the action's timeout less a margin, so the server's kill and report arrive in time. */
export function commandTimeoutMs(actionTimeoutMs: number | undefined): number {
  const total = actionTimeoutMs ?? ACTION_TIMEOUT_DEFAULT_MS;
  return Math.max(1, total - Math.min(1_000, Math.floor(total / 10)));
}

function toOutput(result: SandboxExecResult): Json {
  return {
    stdout: result.stdout,
    stderr: result.stderr,
    exit_code: result.exit_code,
    truncated: result.truncated,
    timed_out: result.timed_out,
    stdout_bytes: result.stdout_bytes,
    stderr_bytes: result.stderr_bytes,
    duration_ms: result.duration_ms,
  };
}

function stderrTail(result: SandboxExecResult): string {
  const text = result.stderr.trimEnd();
  if (text === "") {
    return "";
  }
  return `; stderr: ${text.length > STDERR_TAIL_CHARS ? `…${text.slice(-STDERR_TAIL_CHARS)}` : text}`;
}
