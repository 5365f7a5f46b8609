import { z } from "zod";

/**
 * The standard library of the `tool` action: the input and output
 * schema of every tool. Inputs are strict objects: an unknown field is an
 * error, not ignored. docs/containers.md documents each tool.
 *
 * The container tools work in the run's container (the one the node binds
 * to the action's `resource_name`, default `container`); paths are relative to
 * its workspace. The artifact tools work in R2 and need no container.
 */

/** A path relative to the container's workspace. */
const WorkspacePath = z.string().min(1).max(4096);
/** A git repository's directory, relative to the workspace; default `.`. */
const RepoDir = WorkspacePath.optional();
const Encoding = z.enum(["utf8", "base64"]);
const EnvVars = z.record(
  z
    .string()
    .regex(/^(?!TRELLIS_)[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name not starting with TRELLIS_"),
  z.string(),
);
const TimeoutMs = z.number().int().min(1).max(3_600_000);
/** A git ref or remote name as a tool takes it: never an option (no leading `-`). */
const GitName = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^-\s][^\s]*$/, "must not start with - or contain whitespace");
/** A package spec for npm or pip (`left-pad`, `left-pad@1.3.0`, `requests>=2`): never an option. */
const PackageSpec = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^-\s][^\s]*$/, "must not start with - or contain whitespace");
const CommitId = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "a full commit id");

/** What every command-running tool reports of its command. */
const commandResult = {
  exit_code: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.boolean(),
  timed_out: z.boolean(),
  duration_ms: z.number().min(0),
};

/** Inputs of run_tests, run_lint, run_build. */
const ProjectCommandInput = z.strictObject({
  /** Shell text to run instead of the detected command (run by bash -c; never map untrusted input here). */
  command: z.string().min(1).optional(),
  /** Extra arguments, appended as separate words (passed as data, never parsed by the shell). */
  args: z.array(z.string()).optional(),
  working_dir: WorkspacePath.optional(),
  env: EnvVars.optional(),
  /** Default: the action's timeout less a margin. */
  timeout_ms: TimeoutMs.optional(),
});

const ProjectCommandOutput = z.strictObject({
  /** Exit code 0 (and not timed out). A failing command is reported, not thrown. */
  passed: z.boolean(),
  /** What ran: the given command, or the detected one. */
  command: z.string(),
  ...commandResult,
});

const PackageManager = z.enum(["npm", "pip"]);

/** An artifact's name: `/`-separated segments of letters, digits, `.`, `_`, `-`; no `..`. */
export const ArtifactName = z
  .string()
  .min(1)
  .max(512)
  .regex(
    /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/,
    "must be /-separated segments of letters, digits, . _ - (not starting with .)",
  );

const ArtifactInfo = z.strictObject({
  name: z.string(),
  /** The R2 key: `runs/<run_id>/artifacts/<name>`. */
  key: z.string(),
  run_id: z.string(),
  size: z.number().int().min(0),
  content_type: z.string(),
  created_at: z.string(),
});

export const TOOL_SCHEMAS = {
  read_file: {
    input: z.strictObject({
      path: WorkspacePath,
      encoding: Encoding.optional(),
      /** Default 1 MiB; at most 32 MiB. */
      max_bytes: z
        .number()
        .int()
        .min(0)
        .max(32 * 1024 * 1024)
        .optional(),
    }),
    output: z.strictObject({
      path: z.string(),
      content: z.string(),
      encoding: Encoding,
      size: z.number().int().min(0),
      truncated: z.boolean(),
    }),
  },
  write_file: {
    input: z.strictObject({
      path: WorkspacePath,
      content: z.string(),
      encoding: Encoding.optional(),
      append: z.boolean().optional(),
      create_dirs: z.boolean().optional(),
    }),
    output: z.strictObject({ path: z.string(), size: z.number().int().min(0) }),
  },
  list_files: {
    input: z.strictObject({
      path: WorkspacePath.optional(),
      recursive: z.boolean().optional(),
      include_hidden: z.boolean().optional(),
      max_entries: z.number().int().min(1).max(10_000).optional(),
    }),
    output: z.strictObject({
      entries: z.array(
        z.strictObject({
          path: z.string(),
          type: z.enum(["file", "dir", "symlink", "other"]),
          size: z.number().int().min(0),
        }),
      ),
      truncated: z.boolean(),
    }),
  },
  delete_file: {
    input: z.strictObject({ path: WorkspacePath, recursive: z.boolean().optional() }),
    output: z.strictObject({ path: z.string(), deleted: z.boolean() }),
  },
  git_status: {
    input: z.strictObject({ repo: RepoDir }),
    output: z.strictObject({
      /** null on a detached HEAD. */
      branch: z.string().nullable(),
      upstream: z.string().nullable(),
      ahead: z.number().int().min(0),
      behind: z.number().int().min(0),
      clean: z.boolean(),
      /** `index` and `worktree` are git's status letters (`M`, `A`, `D`, `R`, `?`, …; space when unchanged). */
      files: z.array(
        z.strictObject({ path: z.string(), index: z.string(), worktree: z.string(), orig_path: z.string().optional() }),
      ),
    }),
  },
  git_commit: {
    input: z.strictObject({
      message: z.string().min(1),
      repo: RepoDir,
      /** Paths to stage (`git add -A -- <paths>`); default everything. */
      paths: z.array(WorkspacePath).optional(),
      allow_empty: z.boolean().optional(),
      /** Default `Trellis` / `trellis@localhost`; also used as committer. */
      author_name: z.string().min(1).optional(),
      author_email: z.string().min(1).optional(),
    }),
    output: z.strictObject({ commit: CommitId, branch: z.string().nullable(), files_changed: z.number().int().min(0) }),
  },
  git_push: {
    input: z.strictObject({
      repo: RepoDir,
      /** Default `origin`. */
      remote: GitName.optional(),
      /** Default the current branch. */
      branch: GitName.optional(),
      /** Default true. */
      set_upstream: z.boolean().optional(),
      force_with_lease: z.boolean().optional(),
      tags: z.boolean().optional(),
    }),
    output: z.strictObject({ remote: z.string(), branch: z.string(), output: z.string() }),
  },
  git_merge: {
    input: z.strictObject({
      /** The branch (or any commit-ish) to merge into the current branch. */
      branch: GitName,
      repo: RepoDir,
      message: z.string().min(1).optional(),
      /** `merge` (default: fast-forward when possible), `ff_only`, or `no_ff`. */
      strategy: z.enum(["merge", "ff_only", "no_ff"]).optional(),
      /** On conflicts, run `git merge --abort` (default true); false leaves the merge in progress. */
      abort_on_conflict: z.boolean().optional(),
    }),
    output: z.strictObject({
      merged: z.boolean(),
      /** HEAD after the merge (before it, when nothing merged). */
      commit: CommitId.nullable(),
      fast_forward: z.boolean(),
      conflicts: z.array(z.string()),
    }),
  },
  run_tests: { input: ProjectCommandInput, output: ProjectCommandOutput },
  run_lint: { input: ProjectCommandInput, output: ProjectCommandOutput },
  run_build: { input: ProjectCommandInput, output: ProjectCommandOutput },
  install_packages: {
    input: z.strictObject({
      packages: z.array(PackageSpec).min(1),
      /** Default: npm when the directory has package.json, pip when it has pyproject.toml, requirements.txt or setup.py, else npm. */
      manager: PackageManager.optional(),
      /** npm: `--save-dev`. */
      dev: z.boolean().optional(),
      working_dir: WorkspacePath.optional(),
      timeout_ms: TimeoutMs.optional(),
    }),
    output: z.strictObject({ manager: PackageManager, packages: z.array(z.string()), ...commandResult }),
  },
  update_dependencies: {
    input: z.strictObject({
      /** Default every dependency. */
      packages: z.array(PackageSpec).optional(),
      manager: PackageManager.optional(),
      working_dir: WorkspacePath.optional(),
      timeout_ms: TimeoutMs.optional(),
    }),
    output: z.strictObject({ manager: PackageManager, ...commandResult }),
  },
  write_artifact: {
    input: z
      .strictObject({
        name: ArtifactName,
        /** The artifact's content; or give `path` to store a workspace file. */
        content: z.string().optional(),
        path: WorkspacePath.optional(),
        /** How `content` is encoded; default utf8. */
        encoding: Encoding.optional(),
        /** Default `text/plain; charset=utf-8` for utf8 content, else `application/octet-stream`. */
        content_type: z.string().min(1).max(256).optional(),
      })
      .refine(
        (input) => (input.content === undefined) !== (input.path === undefined),
        "give exactly one of content and path",
      ),
    output: ArtifactInfo,
  },
  read_artifact: {
    input: z.strictObject({
      name: ArtifactName,
      /** Another run's artifacts; default this run. */
      run_id: z.string().min(1).max(128).optional(),
      /** Default utf8. */
      encoding: Encoding.optional(),
      /** Default 1 MiB; at most 32 MiB. */
      max_bytes: z
        .number()
        .int()
        .min(0)
        .max(32 * 1024 * 1024)
        .optional(),
    }),
    output: ArtifactInfo.extend({ content: z.string(), encoding: Encoding, truncated: z.boolean() }),
  },
  list_artifacts: {
    input: z.strictObject({
      run_id: z.string().min(1).max(128).optional(),
      /** Only names starting with this. */
      prefix: z.string().max(512).optional(),
      /** Default 100; at most 1000. */
      limit: z.number().int().min(1).max(1000).optional(),
    }),
    output: z.strictObject({ artifacts: z.array(ArtifactInfo), truncated: z.boolean() }),
  },
} as const satisfies Record<string, { input: z.ZodType; output: z.ZodType }>;

export type ToolName = keyof typeof TOOL_SCHEMAS;
export const TOOL_NAMES = Object.keys(TOOL_SCHEMAS) as ToolName[];
export type ToolInput<N extends ToolName> = z.infer<(typeof TOOL_SCHEMAS)[N]["input"]>;
export type ToolOutput<N extends ToolName> = z.infer<(typeof TOOL_SCHEMAS)[N]["output"]>;

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(TOOL_SCHEMAS, name);
}
