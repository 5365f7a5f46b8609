/**
 * Running one command of a workspace (`POST /v1/workspaces/:id/exec`): the
 * request's checks, the process in its own group (with the workspace's uid
 * when it has one), the bounded capture of its output, and the kill of
 * whatever it leaves behind.
 */
import { spawn } from "node:child_process";
import { isAbsolute } from "node:path";
import { fileOperation } from "./files.mjs";
import { optionalInt, RequestError } from "./http.mjs";
import { isWithin } from "./paths.mjs";
import { idOf, spawnPrivate } from "./workspace-users.mjs";

/**
 * @typedef {import("./workspaces.mjs").Context} Context
 * @typedef {import("./workspaces.mjs").Workspace} Workspace
 */

/** A command's bound when the request gives none. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** The longest a command may run: 1 hour. */
export const MAX_TIMEOUT_MS = 3_600_000;
/** Output kept per stream when the request gives no `max_output_bytes`: 1 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** The most output a request may ask to keep per stream: 16 MiB. */
export const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Commands running at once, over all workspaces; past it requests answer 429. */
export const MAX_CONCURRENT_COMMANDS = 32;
/** After a command exits, how long its output pipes may stay open (held by leftovers) before they are cut. */
const DRAIN_GRACE_MS = 2_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * @param {Record<string, unknown>} body
 * @param {Workspace} workspace
 * @param {Context} context
 * @param {string} id
 */
export async function execRoute(body, workspace, context, id) {
  const spec = parseExec(body);
  if (context.running.size >= MAX_CONCURRENT_COMMANDS) {
    throw new RequestError(429, "busy", `${MAX_CONCURRENT_COMMANDS} commands are already running`);
  }
  // Checked with the workspace's rights (its uid, when it has one), so the answer tells nothing of other workspaces.
  // The helper's answer is the workspace's to tamper with: it must still name a place inside the workspace.
  const cwd =
    spec.cwd === undefined ? workspace.dir : await fileOperation(context, id, workspace, "cwd", { path: spec.cwd });
  if (typeof cwd !== "string" || !isAbsolute(cwd) || !isWithin(workspace.dir, cwd)) {
    throw new RequestError(
      500,
      "file_agent_failed",
      "the workspace's file helper named a working directory outside the workspace",
    );
  }
  const env = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: workspace.home,
    LANG: "C.UTF-8",
    TERM: "dumb",
    TMPDIR: workspace.tmp,
    GIT_TERMINAL_PROMPT: "0",
    TRELLIS_WORKSPACE: workspace.dir,
    // No passwd entry names a workspace's uid: tools that ask for a user name (Python's getpass) read these.
    ...(workspace.uid === undefined ? {} : { USER: "trellis", LOGNAME: "trellis" }),
    ...spec.env,
  };
  const [file, args] =
    spec.command !== undefined ? [context.shell, ["-c", spec.command]] : [spec.argv[0] ?? "", spec.argv.slice(1)];
  if (workspace.registration.closing)
    throw new RequestError(409, "workspace_deleted", "the workspace is being deleted");
  const identity = workspace.uid === undefined ? undefined : idOf(workspace.uid);
  return runCommand(
    {
      file,
      args,
      cwd,
      env,
      identity,
      timeoutMs: spec.timeoutMs,
      maxOutputBytes: spec.maxOutputBytes,
      stdin: spec.stdin,
    },
    context,
    id,
  );
}

/**
 * @param {Record<string, unknown>} body
 * @returns {{ command?: string, argv: string[], cwd?: string, env: Record<string, string>, timeoutMs: number, maxOutputBytes: number, stdin?: string }}
 */
function parseExec(body) {
  const { command, argv, cwd, env, timeout_ms, max_output_bytes, stdin } = body;
  const hasCommand = command !== undefined;
  const hasArgv = argv !== undefined;
  if (hasCommand === hasArgv)
    throw new RequestError(
      400,
      "bad_request",
      "give exactly one of `command` (a string) and `argv` (an array of strings)",
    );
  if (hasCommand && (typeof command !== "string" || command === "" || command.includes("\0"))) {
    throw new RequestError(400, "bad_request", "`command` must be a non-empty string without NUL");
  }
  if (
    hasArgv &&
    (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && !a.includes("\0")))
  ) {
    throw new RequestError(400, "bad_request", "`argv` must be a non-empty array of strings without NUL");
  }
  if (cwd !== undefined && typeof cwd !== "string")
    throw new RequestError(400, "bad_request", "`cwd` must be a string");
  /** @type {Record<string, string>} */
  const environment = {};
  if (env !== undefined) {
    if (typeof env !== "object" || env === null || Array.isArray(env))
      throw new RequestError(400, "bad_request", "`env` must be an object of strings");
    for (const [name, value] of Object.entries(env)) {
      if (!ENV_NAME.test(name))
        throw new RequestError(400, "bad_request", `"${name}" is not a valid environment variable name`);
      if (typeof value !== "string" || value.includes("\0"))
        throw new RequestError(400, "bad_request", `env.${name} must be a string without NUL`);
      environment[name] = value;
    }
  }
  const timeoutMs = optionalInt(timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS;
  const maxOutputBytes =
    optionalInt(max_output_bytes, "max_output_bytes", 0, MAX_OUTPUT_BYTES) ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (stdin !== undefined && typeof stdin !== "string")
    throw new RequestError(400, "bad_request", "`stdin` must be a string");
  return {
    ...(hasCommand ? { command: /** @type {string} */ (command) } : {}),
    argv: hasArgv ? /** @type {string[]} */ (argv) : [],
    ...(cwd === undefined ? {} : { cwd }),
    env: environment,
    timeoutMs,
    maxOutputBytes,
    ...(stdin === undefined ? {} : { stdin }),
  };
}

/**
 * Runs one process in its own process group and collects its output; with
 * `identity`, as that uid and gid, no supplementary groups, umask 077.
 * @param {CommandSpec} spec
 * @param {Context} context
 * @param {string} id
 */
function runCommand(spec, context, id) {
  const started = Date.now();
  return new Promise((resolveRun, reject) => {
    const { child, stdout, stderr } = startCommand(spec);
    const pid = child.pid;
    if (pid !== undefined) context.running.set(pid, id);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (pid !== undefined) killGroup(pid);
    }, spec.timeoutMs);

    /** @type {{ code: number | null, signal: NodeJS.Signals | null } | undefined} */
    let exit;
    let settled = false;
    const finish = () => {
      if (settled || !exit) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(drainTimer);
      if (pid !== undefined) {
        killGroup(pid);
        context.running.delete(pid);
      }
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolveRun(toExecAnswer(exit, timedOut, stdout.result(), stderr.result(), started));
    };
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let drainTimer;
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      // Leftovers of the group may still hold the pipes open: end them, then give the pipes a moment.
      if (pid !== undefined) killGroup(pid);
      drainTimer = setTimeout(finish, DRAIN_GRACE_MS);
    });
    child.once("close", (code, signal) => {
      exit ??= { code, signal };
      finish();
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      if (pid !== undefined) context.running.delete(pid);
      if (settled) return;
      settled = true;
      reject(toSpawnError(err, spec.file));
    });
  });
}

/**
 * Spawns the command in a new session (so a new process group whose id is
 * its pid), feeds it its stdin, and captures both output streams.
 * @param {CommandSpec} spec
 */
function startCommand(spec) {
  /** @type {import("node:child_process").SpawnOptions} */
  const options = {
    cwd: spec.cwd,
    env: spec.env,
    detached: true, // a new session, so a new process group whose id is the child's pid
    stdio: [spec.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  };
  // libuv calls setgroups(0, NULL) before setgid/setuid when a uid is given: no supplementary groups remain.
  const child =
    spec.identity === undefined
      ? spawn(spec.file, spec.args, options)
      : spawnPrivate(() => spawn(spec.file, spec.args, { ...options, ...spec.identity }));
  const stdout = createCapture(spec.maxOutputBytes);
  const stderr = createCapture(spec.maxOutputBytes);
  child.stdout?.on("data", (chunk) => stdout.push(chunk));
  child.stderr?.on("data", (chunk) => stderr.push(chunk));
  if (spec.stdin !== undefined && child.stdin) {
    child.stdin.on("error", () => {}); // the command may not read its input
    child.stdin.end(spec.stdin);
  }
  return { child, stdout, stderr };
}

/**
 * The exec answer of a command that ended.
 * @param {{ code: number | null, signal: NodeJS.Signals | null }} exit
 * @param {boolean} timedOut
 * @param {{ text: string, bytes: number, truncated: boolean }} out
 * @param {{ text: string, bytes: number, truncated: boolean }} err
 * @param {number} started
 */
function toExecAnswer(exit, timedOut, out, err, started) {
  return {
    exit_code: exit.code,
    signal: exit.signal,
    timed_out: timedOut,
    stdout: out.text,
    stderr: err.text,
    stdout_bytes: out.bytes,
    stderr_bytes: err.bytes,
    truncated: out.truncated || err.truncated,
    duration_ms: Date.now() - started,
  };
}

/**
 * Why a command could not start: `command_not_found` when its program cannot
 * be found or run, else the error as it is.
 * @param {Error} err
 * @param {string} file
 */
function toSpawnError(err, file) {
  const code = /** @type {NodeJS.ErrnoException} */ (err).code;
  // EACCES too: with a workspace's uid, a PATH entry it may not search (under /root, say) ends the lookup so.
  const notFound = code === "ENOENT" || code === "EACCES";
  return notFound ? new RequestError(400, "command_not_found", `cannot run "${file}": ${err.message}`) : err;
}

/**
 * @typedef {{ file: string, args: string[], cwd: string, env: Record<string, string>, identity?: { uid: number, gid: number }, timeoutMs: number, maxOutputBytes: number, stdin?: string }} CommandSpec
 */

/**
 * Sends SIGKILL to a whole process group. Never throws.
 * @param {number} pgid
 */
export function killGroup(pgid) {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    /* the group is gone */
  }
}

/**
 * Keeps the first and last halves of at most `limit` bytes of a stream.
 * @param {number} limit
 */
export function createCapture(limit) {
  const headLimit = Math.ceil(limit / 2);
  const tailLimit = limit - headLimit;
  /** @type {Buffer[]} */
  const head = [];
  let headLength = 0;
  /** @type {Buffer[]} */
  let tail = [];
  let tailLength = 0;
  let total = 0;
  return {
    /** @param {Buffer} chunk */
    push(chunk) {
      total += chunk.length;
      let rest = chunk;
      if (headLength < headLimit) {
        const take = rest.subarray(0, headLimit - headLength);
        head.push(Buffer.from(take));
        headLength += take.length;
        rest = rest.subarray(take.length);
      }
      if (rest.length === 0 || tailLimit === 0) return;
      if (rest.length >= tailLimit) {
        tail = [Buffer.from(rest.subarray(rest.length - tailLimit))];
        tailLength = tailLimit;
        return;
      }
      tail.push(Buffer.from(rest));
      tailLength += rest.length;
      while (tail.length > 1 && tailLength - (tail[0]?.length ?? 0) >= tailLimit) {
        tailLength -= tail.shift()?.length ?? 0;
      }
    },
    /** @returns {{ text: string, bytes: number, truncated: boolean }} */
    result() {
      const headText = Buffer.concat(head).toString("utf8");
      const joined = Buffer.concat(tail);
      if (total <= limit) return { text: headText + joined.toString("utf8"), bytes: total, truncated: false };
      const omitted = total - headLength - tailLimit;
      const tailText = joined.subarray(joined.length - tailLimit).toString("utf8");
      return { text: `${headText}\n… [${omitted} bytes omitted] …\n${tailText}`, bytes: total, truncated: true };
    },
  };
}
