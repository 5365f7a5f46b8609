import type { z } from "zod";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { issuesToDetails, summarize } from "../lib/validation.ts";
import {
  SandboxDeleteRequest,
  SandboxDeleteResult,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxListRequest,
  SandboxListResult,
  SandboxReadRequest,
  SandboxReadResult,
  SandboxWriteRequest,
  SandboxWriteResult,
  type SandboxReply,
} from "../schemas/sandbox.ts";

/**
 * The one way the Sandbox reaches its shell server: the container's port in
 * production, the local process in local mode, a fake in tests. Narrow on
 * purpose, so the Durable Object's logic runs without a container.
 */
export interface ShellTransport {
  /**
   * One JSON request to the shell server about `workspace`; `path` starts with
   * `/v1/workspaces/<workspace>`. The transport presents the workspace's
   * credential (registering it when the server does not know it yet).
   */
  request(
    method: "POST" | "DELETE",
    path: string,
    body: unknown,
    workspace: string,
  ): Promise<{ status: number; json: unknown }>;
  /** Ends what holds the workspace: stops the container, or deletes the workspace from the local server. */
  shutdown(workspace: string): Promise<void>;
}

/** Who owns a container: recorded on first use, kept after release so the name never passes to another run. */
export interface OwnerRecord {
  run_id: string;
  container: string;
  claimed_at: string;
  released_at?: string;
}

/** Where the Sandbox keeps its owner record (Durable Object storage; a Map in tests). */
export interface OwnerStore {
  get(): OwnerRecord | undefined;
  put(record: OwnerRecord): void;
}

export interface SandboxCoreDeps {
  store: OwnerStore;
  /** The transport, or an error explaining why there is none (e.g. containers disabled here). */
  transport: () => ShellTransport;
  /** The Durable Object's own name when the runtime knows it (`ctx.id.name`). */
  name: string | undefined;
  now: () => Date;
}

type CallerFields = { container: string; run_id: string; owner?: string | undefined };

/** One operation: how its request is parsed, where it goes, how its answer is parsed. */
interface Operation<Req extends z.ZodType, Res extends z.ZodType> {
  request: Req;
  result: Res;
  route: string;
}

const OPERATIONS = {
  exec: { request: SandboxExecRequest, result: SandboxExecResult, route: "exec" },
  readFile: { request: SandboxReadRequest, result: SandboxReadResult, route: "files/read" },
  writeFile: { request: SandboxWriteRequest, result: SandboxWriteResult, route: "files/write" },
  listFiles: { request: SandboxListRequest, result: SandboxListResult, route: "files/list" },
  deleteFile: { request: SandboxDeleteRequest, result: SandboxDeleteResult, route: "files/delete" },
} as const satisfies Record<string, Operation<z.ZodType, z.ZodType>>;

export type SandboxOperation = keyof typeof OPERATIONS;

/** Shell server error codes that are the caller's fault (not retryable), by name. */
const SERVER_ERROR_CODES = new Set([
  "bad_request",
  "bad_cwd",
  "command_not_found",
  "path_outside_workspace",
  "no_such_file",
  "is_a_directory",
  "not_a_directory",
  "too_large",
  "permission_denied",
  "workspace_deleted",
]);

/**
 * The Sandbox's logic, free of the container runtime: ownership, request
 * validation and forwarding to the shell server. Every method answers a
 * {@link SandboxReply} and never throws.
 *
 * Ownership: the first request records its claimant (`owner` when a parent
 * handed the container down, else `run_id`) as the owner; any later request
 * whose claimant differs is refused with `container.not_owner` (not
 * retryable). A request must also name this container: the name it gives is
 * checked against the Durable Object's own name (when the runtime tells it)
 * and against the recorded one, so one container's stub can never reach
 * another container's workspace on a shared local shell server.
 */
export class SandboxCore {
  readonly #deps: SandboxCoreDeps;

  constructor(deps: SandboxCoreDeps) {
    this.#deps = deps;
  }

  /** Forwards one operation after validating it and checking ownership. */
  async call<K extends SandboxOperation>(
    operation: K,
    raw: unknown,
  ): Promise<SandboxReply<z.infer<(typeof OPERATIONS)[K]["result"]>>> {
    const spec: Operation<z.ZodType, z.ZodType> = OPERATIONS[operation];
    try {
      const parsed = spec.request.safeParse(raw);
      if (!parsed.success) {
        throw EngineError.terminal(
          "container.invalid_request",
          `invalid ${operation} request: ${summarize(issuesToDetails(parsed.error.issues))}`,
        );
      }
      const {
        container: _container,
        run_id: _runId,
        owner: _owner,
        ...body
      } = parsed.data as CallerFields & Record<string, unknown>;
      const record = this.admit(parsed.data as CallerFields);
      const answer = await this.#send(
        "POST",
        `/v1/workspaces/${encodeURIComponent(record.container)}/${spec.route}`,
        body,
        record.container,
      );
      const result = spec.result.safeParse(answer);
      if (!result.success) {
        throw EngineError.retryable(
          "container.bad_answer",
          `the shell server's ${operation} answer is malformed: ${summarize(issuesToDetails(result.error.issues))}`,
        );
      }
      return { ok: true, value: result.data as z.infer<(typeof OPERATIONS)[K]["result"]> };
    } catch (thrown) {
      const error = ensureEngineError(thrown, "container.failed");
      return { ok: false, error: { code: error.code, message: error.message, retryable: error.retryable } };
    }
  }

  /**
   * Checks the caller against the owner record, claiming the container on
   * first use. Synchronous, so two first requests cannot both claim it.
   */
  admit(caller: CallerFields): OwnerRecord {
    const name = this.#deps.name;
    if (name !== undefined && caller.container !== name) {
      throw EngineError.terminal("container.wrong_container", `this is container "${name}", not "${caller.container}"`);
    }
    const claimant = caller.owner ?? caller.run_id;
    const record = this.#deps.store.get();
    if (record === undefined) {
      const claimed: OwnerRecord = {
        run_id: claimant,
        container: caller.container,
        claimed_at: this.#deps.now().toISOString(),
      };
      this.#deps.store.put(claimed);
      return claimed;
    }
    if (record.container !== caller.container) {
      throw EngineError.terminal(
        "container.wrong_container",
        `this is container "${record.container}", not "${caller.container}"`,
      );
    }
    if (record.run_id !== claimant) {
      const via = caller.owner === undefined ? "" : ` (handed down as "${caller.owner}")`;
      throw EngineError.terminal(
        "container.not_owner",
        `container "${record.container}" belongs to run ${record.run_id}; run ${caller.run_id}${via} may not use it`,
      );
    }
    if (record.released_at !== undefined) {
      this.#deps.store.put({ run_id: record.run_id, container: record.container, claimed_at: record.claimed_at });
    }
    return record;
  }

  /**
   * Stops the container (or deletes the local workspace) and forgets the
   * workspace. The owner record stays, marked released: the same run may
   * use the container again (a redriven run gets a fresh workspace), no
   * other run ever can.
   */
  async release(): Promise<{ released: boolean }> {
    const record = this.#deps.store.get();
    if (record === undefined) {
      return { released: false };
    }
    await this.#deps.transport().shutdown(record.container);
    this.#deps.store.put({ ...record, released_at: this.#deps.now().toISOString() });
    return { released: true };
  }

  async #send(method: "POST", path: string, body: unknown, container: string): Promise<unknown> {
    let answer: { status: number; json: unknown };
    try {
      answer = await this.#deps.transport().request(method, path, body, container);
    } catch (thrown) {
      const error = ensureEngineError(thrown);
      if (error.code.startsWith("container.")) {
        throw error;
      }
      throw EngineError.retryable(
        "container.unavailable",
        `container "${container}" could not be reached: ${error.message}`,
      );
    }
    if (answer.status === 200) {
      return answer.json;
    }
    const { code, message } = serverError(answer.json);
    if (answer.status === 401) {
      throw EngineError.terminal("container.unauthorized", "the shell server refused the Sandbox's token");
    }
    if (answer.status === 429 || answer.status >= 500) {
      throw EngineError.retryable("container.unavailable", `the shell server answered ${answer.status}: ${message}`);
    }
    throw EngineError.terminal(`container.${SERVER_ERROR_CODES.has(code) ? code : "bad_request"}`, message);
  }
}

function serverError(json: unknown): { code: string; message: string } {
  if (typeof json === "object" && json !== null && "error" in json) {
    const error = (json as { error: unknown }).error;
    if (typeof error === "object" && error !== null) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      return {
        code: typeof code === "string" ? code : "unknown",
        message: typeof message === "string" ? message : "no message",
      };
    }
  }
  return { code: "unknown", message: JSON.stringify(json)?.slice(0, 200) ?? "no body" };
}
