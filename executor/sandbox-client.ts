import type { z } from "zod";
import { EngineError } from "../lib/errors.ts";
import { issuesToDetails, summarize } from "../lib/validation.ts";
import {
  SandboxDeleteResult,
  SandboxExecResult,
  SandboxListResult,
  SandboxReadResult,
  SandboxWriteResult,
  sandboxReply,
  type SandboxDeleteRequest,
  type SandboxExecRequest,
  type SandboxListRequest,
  type SandboxReadRequest,
  type SandboxReply,
  type SandboxWriteRequest,
} from "../schemas/sandbox.ts";
import type { ActionContext } from "./actions/types.ts";

/** The generic name actions use for their container when they name none. */
export const DEFAULT_RESOURCE_NAME = "container";

type Caller = "container" | "run_id" | "owner";

/** A run's container as an action sees it: typed calls, errors thrown as EngineError. */
export interface SandboxClient {
  /** The container's durable name, `<run_id>/<resource>`. */
  readonly container: string;
  exec(request: Omit<SandboxExecRequest, Caller>): Promise<SandboxExecResult>;
  readFile(request: Omit<SandboxReadRequest, Caller>): Promise<SandboxReadResult>;
  writeFile(request: Omit<SandboxWriteRequest, Caller>): Promise<SandboxWriteResult>;
  listFiles(request: Omit<SandboxListRequest, Caller>): Promise<SandboxListResult>;
  deleteFile(request: Omit<SandboxDeleteRequest, Caller>): Promise<SandboxDeleteResult>;
}

/**
 * The container bound to `resourceName` for this task (`payload.resources`,
 * filled by the coordinator from the node's `resource_bindings`). Every
 * request carries the task's run id, and the owner when a parent handed the
 * container down; the Sandbox refuses anyone else.
 * @throws EngineError `container.not_bound` when the node binds no such
 *   container, `container.unavailable` when the Worker has no SANDBOX binding.
 */
export function sandboxFor(context: ActionContext, resourceName: string = DEFAULT_RESOURCE_NAME): SandboxClient {
  const handle = context.payload.resources[resourceName];
  if (handle === undefined) {
    throw EngineError.terminal(
      "container.not_bound",
      `this step uses the container "${resourceName}", but its node binds none: declare a resource in the workflow's "resources" and bind it with "resource_bindings": { "${resourceName}": "<resource>" } on the node`,
    );
  }
  const namespace = context.env.SANDBOX;
  if (namespace === undefined) {
    throw EngineError.terminal("container.unavailable", "this Worker has no SANDBOX binding (wrangler.toml)");
  }
  const stub = namespace.get(namespace.idFromName(handle.id));
  const caller = {
    container: handle.id,
    run_id: context.payload.workflow_run_id,
    ...(handle.owner === undefined ? {} : { owner: handle.owner }),
  };
  // RPC stubs answer any property as a remote method (`stub.exec.call` would call a method named "call"): call each one directly.
  const call = async <T extends z.ZodType>(
    send: (request: object) => Promise<unknown>,
    result: T,
    request: object,
  ): Promise<z.infer<T>> => {
    let raw: unknown;
    try {
      raw = await send({ ...caller, ...request });
    } catch (thrown) {
      throw platformError(thrown, handle.id);
    }
    const reply = sandboxReply(result).safeParse(raw);
    if (!reply.success) {
      throw EngineError.retryable(
        "container.bad_answer",
        `container "${handle.id}" answered something malformed: ${summarize(issuesToDetails(reply.error.issues))}`,
      );
    }
    const data = reply.data as SandboxReply<z.infer<T>>;
    if (!data.ok) {
      throw new EngineError(data.error.code, data.error.message, { retryable: data.error.retryable });
    }
    return data.value;
  };
  return {
    container: handle.id,
    exec: (request) => call((body) => stub.exec(body), SandboxExecResult, request),
    readFile: (request) => call((body) => stub.readFile(body), SandboxReadResult, request),
    writeFile: (request) => call((body) => stub.writeFile(body), SandboxWriteResult, request),
    listFiles: (request) => call((body) => stub.listFiles(body), SandboxListResult, request),
    deleteFile: (request) => call((body) => stub.deleteFile(body), SandboxDeleteResult, request),
  };
}

/**
 * A Durable Object call that threw: the platform's failures (a reset object,
 * an overloaded one, a network blip) carry `retryable` / `overloaded`.
 */
function platformError(thrown: unknown, container: string): EngineError {
  const flags =
    typeof thrown === "object" && thrown !== null ? (thrown as { retryable?: unknown; overloaded?: unknown }) : {};
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  const retryable = flags.overloaded !== true;
  return new EngineError("container.unavailable", `calling container "${container}" failed: ${message}`, { retryable });
}
