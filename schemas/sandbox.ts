import { z } from "zod";

/**
 * The Sandbox (container Durable Object) RPC surface: what the executor sends
 * to a run's container and what comes back. Every request names the container
 * and the run that calls it; the Durable Object refuses a run that does not
 * own the container (`container.not_owner`). Replies carry errors as data:
 * `{ ok: false, error }`, never thrown across RPC.
 */

/** Who calls, and which container: the fields every request carries. */
const callerFields = {
  /** The container's durable name, `<run_id>/<declared resource>`: the name the stub was got by. */
  container: z.string().min(1).max(256),
  /** The run whose task sends the request. */
  run_id: z.string().min(1),
  /**
   * The run that owns the container, when it is not `run_id`: set only when a
   * parent run hands its container to a sub-workflow (see ResourceHandle.owner).
   */
  owner: z.string().min(1).optional(),
};

const EnvVars = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
  z.string(),
);

/** Runs one command: exactly one of `command` (shell text, run by bash -c) or `argv` (no shell). */
export const SandboxExecRequest = z
  .strictObject({
    ...callerFields,
    command: z.string().min(1).optional(),
    argv: z.array(z.string()).min(1).optional(),
    /** Relative to the workspace; default the workspace itself. */
    cwd: z.string().min(1).optional(),
    env: EnvVars.optional(),
    /** Default 60 000; at most 1 hour. The whole process group is killed past it. */
    timeout_ms: z.number().int().min(1).max(3_600_000).optional(),
    /** Output kept per stream (head and tail); default 1 MiB, at most 16 MiB. */
    max_output_bytes: z
      .number()
      .int()
      .min(0)
      .max(16 * 1024 * 1024)
      .optional(),
    stdin: z.string().optional(),
  })
  .refine(
    (request) => (request.command === undefined) !== (request.argv === undefined),
    "give exactly one of command and argv",
  );
export type SandboxExecRequest = z.infer<typeof SandboxExecRequest>;

export const SandboxExecResult = z.strictObject({
  /** null when the command was ended by a signal (a timeout kills it with SIGKILL). */
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  timed_out: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  /** Bytes the command wrote to each stream, whether kept or not. */
  stdout_bytes: z.number().int().min(0),
  stderr_bytes: z.number().int().min(0),
  /** True when either stream was longer than the limit: its middle was left out. */
  truncated: z.boolean(),
  duration_ms: z.number().min(0),
});
export type SandboxExecResult = z.infer<typeof SandboxExecResult>;

export const FileEncoding = z.enum(["utf8", "base64"]);

export const SandboxReadRequest = z.strictObject({
  ...callerFields,
  path: z.string().min(1),
  encoding: FileEncoding.optional(),
  max_bytes: z
    .number()
    .int()
    .min(0)
    .max(32 * 1024 * 1024)
    .optional(),
});
export type SandboxReadRequest = z.infer<typeof SandboxReadRequest>;

export const SandboxReadResult = z.strictObject({
  path: z.string(),
  content: z.string(),
  encoding: FileEncoding,
  /** The file's size in bytes (more than was read when `truncated`). */
  size: z.number().int().min(0),
  truncated: z.boolean(),
});
export type SandboxReadResult = z.infer<typeof SandboxReadResult>;

export const SandboxWriteRequest = z.strictObject({
  ...callerFields,
  path: z.string().min(1),
  content: z.string(),
  encoding: FileEncoding.optional(),
  append: z.boolean().optional(),
  /** Create missing parent directories; default true. */
  create_dirs: z.boolean().optional(),
});
export type SandboxWriteRequest = z.infer<typeof SandboxWriteRequest>;

export const SandboxWriteResult = z.strictObject({ path: z.string(), size: z.number().int().min(0) });
export type SandboxWriteResult = z.infer<typeof SandboxWriteResult>;

export const SandboxListRequest = z.strictObject({
  ...callerFields,
  path: z.string().min(1).optional(),
  recursive: z.boolean().optional(),
  include_hidden: z.boolean().optional(),
  max_entries: z.number().int().min(1).max(10_000).optional(),
});
export type SandboxListRequest = z.infer<typeof SandboxListRequest>;

export const FileEntry = z.strictObject({
  /** Relative to the workspace, `/`-separated. */
  path: z.string(),
  type: z.enum(["file", "dir", "symlink", "other"]),
  size: z.number().int().min(0),
});
export type FileEntry = z.infer<typeof FileEntry>;

export const SandboxListResult = z.strictObject({ entries: z.array(FileEntry), truncated: z.boolean() });
export type SandboxListResult = z.infer<typeof SandboxListResult>;

export const SandboxDeleteRequest = z.strictObject({
  ...callerFields,
  path: z.string().min(1),
  recursive: z.boolean().optional(),
});
export type SandboxDeleteRequest = z.infer<typeof SandboxDeleteRequest>;

export const SandboxDeleteResult = z.strictObject({ path: z.string(), deleted: z.boolean() });
export type SandboxDeleteResult = z.infer<typeof SandboxDeleteResult>;

/** An error as data (the shape of EngineError.toData()). */
export const SandboxError = z.strictObject({
  code: z.string().min(1),
  message: z.string(),
  retryable: z.boolean(),
});
export type SandboxError = z.infer<typeof SandboxError>;

/** `{ ok: true, value }` or `{ ok: false, error }`. */
export function sandboxReply<T extends z.ZodType>(value: T) {
  return z.discriminatedUnion("ok", [
    z.strictObject({ ok: z.literal(true), value }),
    z.strictObject({ ok: z.literal(false), error: SandboxError }),
  ]);
}
export type SandboxReply<T> = { ok: true; value: T } | { ok: false; error: SandboxError };

/** What `release()` answers. */
export const SandboxReleaseResult = z.strictObject({ released: z.boolean() });
export type SandboxReleaseResult = z.infer<typeof SandboxReleaseResult>;
