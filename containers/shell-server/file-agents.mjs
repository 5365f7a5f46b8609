/**
 * The file helpers (file-agent.mjs), for a shell server that gives each
 * workspace its own uid (workspace-users.mjs): the file operations that the
 * server performs for a workspace (read, write, list, delete, resolving a
 * working directory) run in a helper process with the workspace's uid, one
 * per active workspace, ended after {@link FILE_AGENT_IDLE_MS} without work.
 * The path checks stay as they were (no `..`, no absolute path, no symbolic
 * link out), and the kernel now enforces them too: a link swapped in between
 * the check and the open leads only where that uid may go.
 */
import { spawn } from "node:child_process";
import { spawnPrivate } from "./workspace-users.mjs";

/** A workspace's file helper ends after this long without a request. */
export const FILE_AGENT_IDLE_MS = 15_000;
/** A file operation that takes longer (a FIFO that nobody writes) ends its helper: 504 `file_op_timeout`. */
export const FILE_OP_TIMEOUT_MS = 60_000;
/** The largest answer a helper may send: a 32 MiB read as JSON text, where a control byte takes 6 characters (`\u0000`), and room to spare. */
const MAX_AGENT_ANSWER_BYTES = 6 * 32 * 1024 * 1024 + 1024 * 1024;

// ───────────────────────────── file helpers ─────────────────────────────

/**
 * One file helper per workspace, as the workspace's uid, started on first use
 * and ended after {@link FILE_AGENT_IDLE_MS} idle. Requests and answers are
 * JSON lines over its standard input and output; many may be in flight.
 * Whatever the helper answers is treated as the workspace's (its commands
 * could tamper with it): sizes are bounded and shapes checked.
 * @param {AgentRuntime} runtime  the node and file-agent.mjs that the workspaces' uids run (agent-runtime.mjs)
 */
export function createFileAgents(runtime) {
  /** @type {Map<string, ReturnType<typeof startAgent>>} */
  const agents = new Map();

  return {
    /**
     * @param {string} key          the workspace id
     * @param {Identity & { dir: string, home: string }} workspace
     * @param {string} op
     * @param {Record<string, unknown>} body
     * @returns {Promise<AgentAnswer>}
     */
    request(key, workspace, op, body) {
      let agent = agents.get(key);
      if (agent === undefined || agent.ended) {
        agent = startAgent(runtime, workspace, () => {
          if (agents.get(key) === agent) agents.delete(key);
        });
        agents.set(key, agent);
      }
      return agent.request(op, body);
    },
    /** @param {string} key */
    stop(key) {
      agents.get(key)?.stop();
      agents.delete(key);
    },
    stopAll() {
      for (const agent of agents.values()) agent.stop();
      agents.clear();
    },
  };
}

/**
 * One running file helper: its process, the requests waiting for an answer,
 * the answer line received so far, and its idle timer.
 * @typedef {object} Agent
 * @property {import("node:child_process").ChildProcess} child
 * @property {Map<number, { resolve: (answer: AgentAnswer) => void, timer: ReturnType<typeof setTimeout> }>} pending
 * @property {number} next              the number of the next request
 * @property {Buffer[]} partial         the part of an answer line received so far
 * @property {number} partialLength
 * @property {ReturnType<typeof setTimeout> | undefined} idle
 * @property {boolean} ended
 * @property {() => void} onEnd
 */

/**
 * @param {AgentRuntime} runtime
 * @param {Identity & { dir: string, home: string }} workspace
 * @param {() => void} onEnd
 */
function startAgent(runtime, workspace, onEnd) {
  const child = spawnPrivate(() =>
    spawn(runtime.node, [runtime.agentFile, workspace.dir], {
      uid: workspace.uid,
      gid: workspace.gid,
      cwd: workspace.dir,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: workspace.home, LANG: "C.UTF-8" },
      stdio: ["pipe", "pipe", "ignore"],
    }),
  );
  /** @type {Agent} */
  const agent = {
    child,
    pending: new Map(),
    next: 1,
    partial: [],
    partialLength: 0,
    idle: undefined,
    ended: false,
    onEnd,
  };

  child.stdout?.on("data", (/** @type {Buffer} */ chunk) => receiveChunk(agent, chunk));
  child.stdin?.on("error", () => {});
  child.once("error", (err) =>
    endAgent(agent, {
      status: 500,
      code: "file_agent_failed",
      message: `cannot start the workspace's file helper: ${err.message}`,
    }),
  );
  child.once("exit", (code, signal) =>
    endAgent(agent, {
      status: 500,
      code: "file_agent_failed",
      message: `the workspace's file helper ended (${signal ?? `exit ${code}`})`,
    }),
  );

  return {
    get ended() {
      return agent.ended;
    },
    /**
     * @param {string} op
     * @param {Record<string, unknown>} body
     * @returns {Promise<AgentAnswer>}
     */
    request(op, body) {
      return requestAgent(agent, op, body);
    },
    stop() {
      endAgent(agent, { status: 409, code: "workspace_deleted", message: "the workspace is being deleted" });
    },
  };
}

/**
 * Ends the helper, once: kills it and answers every waiting request with `error`.
 * @param {Agent} agent
 * @param {AgentError} error
 */
function endAgent(agent, error) {
  if (agent.ended) return;
  agent.ended = true;
  if (agent.idle) clearTimeout(agent.idle);
  try {
    agent.child.kill("SIGKILL");
  } catch {
    /* gone */
  }
  for (const { resolve, timer } of agent.pending.values()) {
    clearTimeout(timer);
    resolve({ ok: false, error });
  }
  agent.pending.clear();
  agent.onEnd();
}

/**
 * With no request waiting, ends the helper after {@link FILE_AGENT_IDLE_MS}.
 * @param {Agent} agent
 */
function armIdle(agent) {
  if (agent.idle) clearTimeout(agent.idle);
  if (agent.pending.size > 0) return;
  agent.idle = setTimeout(
    () => endAgent(agent, { status: 500, code: "internal", message: "the file helper was idle" }),
    FILE_AGENT_IDLE_MS,
  );
  agent.idle.unref();
}

/**
 * Sends one request and waits for its answer; a request that takes longer
 * than {@link FILE_OP_TIMEOUT_MS} ends the helper.
 * @param {Agent} agent
 * @param {string} op
 * @param {Record<string, unknown>} body
 * @returns {Promise<AgentAnswer>}
 */
function requestAgent(agent, op, body) {
  if (agent.ended)
    return Promise.resolve({
      ok: false,
      error: { status: 500, code: "file_agent_failed", message: "the file helper has ended" },
    });
  if (agent.idle) clearTimeout(agent.idle);
  const n = agent.next;
  agent.next += 1;
  return new Promise((resolve) => {
    const timer = setTimeout(
      () =>
        endAgent(agent, {
          status: 504,
          code: "file_op_timeout",
          message: `a file operation took longer than ${FILE_OP_TIMEOUT_MS} ms (a FIFO?)`,
        }),
      FILE_OP_TIMEOUT_MS,
    );
    agent.pending.set(n, { resolve, timer });
    agent.child.stdin?.write(`${JSON.stringify({ n, op, body })}\n`);
  });
}

/**
 * Splits the helper's output into answer lines; a line longer than
 * {@link MAX_AGENT_ANSWER_BYTES} ends the helper.
 * @param {Agent} agent
 * @param {Buffer} chunk
 */
function receiveChunk(agent, chunk) {
  let rest = chunk;
  for (let at = rest.indexOf(10); at >= 0; at = rest.indexOf(10)) {
    agent.partial.push(rest.subarray(0, at));
    const line = Buffer.concat(agent.partial);
    agent.partial = [];
    agent.partialLength = 0;
    rest = rest.subarray(at + 1);
    receiveLine(agent, line);
    if (agent.ended) return;
  }
  agent.partial.push(rest);
  agent.partialLength += rest.length;
  if (agent.partialLength > MAX_AGENT_ANSWER_BYTES)
    endAgent(agent, {
      status: 500,
      code: "file_agent_failed",
      message: "the workspace's file helper answered too much",
    });
}

/**
 * Settles the request one answer line names; a line that names none ends the
 * helper, and a malformed error becomes `file_agent_failed`.
 * @param {Agent} agent
 * @param {Buffer} line
 */
function receiveLine(agent, line) {
  let answer;
  try {
    answer = JSON.parse(line.toString("utf8"));
  } catch {
    answer = undefined;
  }
  const entry = typeof answer?.n === "number" ? agent.pending.get(answer.n) : undefined;
  if (entry === undefined)
    return endAgent(agent, {
      status: 500,
      code: "file_agent_failed",
      message: "the workspace's file helper answered something malformed",
    });
  agent.pending.delete(answer.n);
  clearTimeout(entry.timer);
  const error = answer.error;
  if (error !== undefined) {
    const valid =
      typeof error?.status === "number" && typeof error?.code === "string" && typeof error?.message === "string";
    entry.resolve({
      ok: false,
      error: valid
        ? error
        : { status: 500, code: "file_agent_failed", message: "malformed error from the file helper" },
    });
  } else {
    entry.resolve({ ok: true, value: answer.value });
  }
  armIdle(agent);
}
