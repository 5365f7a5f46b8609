import { EngineError } from "../../lib/errors.ts";
import type { ToolOutput } from "../../schemas/tools.ts";
import { markers, runScript, tail } from "./script.ts";
import type { Tool } from "./types.ts";

/** Who commits when the input names nobody. */
export const DEFAULT_AUTHOR = { name: "Trellis", email: "trellis@localhost" } as const;

/** git identity as environment variables: no `git config` is written. */
function identity(name: string | undefined, email: string | undefined): Record<string, string> {
  const who = { name: name ?? DEFAULT_AUTHOR.name, email: email ?? DEFAULT_AUTHOR.email };
  return {
    GIT_AUTHOR_NAME: who.name,
    GIT_AUTHOR_EMAIL: who.email,
    GIT_COMMITTER_NAME: who.name,
    GIT_COMMITTER_EMAIL: who.email,
  };
}

function failed(
  code: string,
  what: string,
  result: { exit_code: number | null; stdout: string; stderr: string; timed_out: boolean },
): EngineError {
  if (result.timed_out) {
    return EngineError.retryable("tool.timeout", `${what} timed out`);
  }
  const output = tail(`${result.stderr}\n${result.stdout}`.trim());
  return EngineError.terminal(
    code,
    `${what} failed (exit ${result.exit_code ?? "by signal"})${output === "" ? "" : `: ${output}`}`,
  );
}

export const gitStatusTool: Tool<"git_status"> = {
  async run(input, context) {
    const result = await runScript(context, "exec git status --porcelain=v1 --branch -z", [], { cwd: input.repo });
    if (result.exit_code !== 0) {
      throw failed("git.failed", "git status", result);
    }
    return parseStatus(result.stdout);
  },
};

/** `git status --porcelain=v1 --branch -z`: a `## …` header, then `XY path` entries (renames add the old path). */
export function parseStatus(stdout: string): ToolOutput<"git_status"> {
  const parts = stdout.split("\0");
  const status: ToolOutput<"git_status"> = {
    branch: null,
    upstream: null,
    ahead: 0,
    behind: 0,
    clean: true,
    files: [],
  };
  for (let i = 0; i < parts.length; i += 1) {
    const part = parts[i] ?? "";
    if (part === "") {
      continue;
    }
    if (part.startsWith("## ")) {
      Object.assign(status, parseBranchLine(part.slice(3)));
      continue;
    }
    const index = part[0] ?? " ";
    const worktree = part[1] ?? " ";
    const file: ToolOutput<"git_status">["files"][number] = { path: part.slice(3), index, worktree };
    if (index === "R" || index === "C") {
      i += 1;
      file.orig_path = parts[i] ?? "";
    }
    status.files.push(file);
  }
  status.clean = status.files.length === 0;
  return status;
}

function parseBranchLine(line: string): Pick<ToolOutput<"git_status">, "branch" | "upstream" | "ahead" | "behind"> {
  const match = /^(?:No commits yet on |Initial commit on )?(.+?)(?:\.\.\.(\S+))?(?: \[(.*)\])?$/.exec(line);
  const name = match?.[1] ?? null;
  const counts = match?.[3] ?? "";
  return {
    branch: name === null || name.startsWith("HEAD (") ? null : name,
    upstream: match?.[2] ?? null,
    ahead: Number(/ahead (\d+)/.exec(counts)?.[1] ?? 0),
    behind: Number(/behind (\d+)/.exec(counts)?.[1] ?? 0),
  };
}

const COMMIT_SCRIPT = `set -e
msg="$1"; allow="$2"; shift 2
if [ "$#" -gt 0 ]; then git add -A -- "$@"; else git add -A; fi
if [ "$allow" != 1 ] && git diff --cached --quiet; then echo "nothing to commit" >&2; exit 3; fi
files=$(git diff --cached --name-only | wc -l | tr -d ' ')
extra=""; if [ "$allow" = 1 ]; then extra="--allow-empty"; fi
git -c commit.gpgsign=false commit -q $extra -m "$msg"
printf 'trellis-commit=%s\\n' "$(git rev-parse HEAD)"
printf 'trellis-branch=%s\\n' "$(git symbolic-ref --short -q HEAD || true)"
printf 'trellis-files=%s\\n' "$files"
`;

export const gitCommitTool: Tool<"git_commit"> = {
  async run(input, context) {
    const args = [input.message, input.allow_empty === true ? "1" : "0", ...(input.paths ?? [])];
    const result = await runScript(context, COMMIT_SCRIPT, args, {
      cwd: input.repo,
      env: identity(input.author_name, input.author_email),
    });
    if (result.exit_code === 3) {
      throw EngineError.terminal(
        "git.nothing_to_commit",
        "nothing to commit (pass allow_empty: true to commit anyway)",
      );
    }
    const found = markers(result.stdout);
    const commit = found.get("commit")?.at(-1);
    if (result.exit_code !== 0 || commit === undefined) {
      throw failed("git.failed", "git commit", result);
    }
    const branch = found.get("branch")?.at(-1) ?? "";
    return { commit, branch: branch === "" ? null : branch, files_changed: Number(found.get("files")?.at(-1) ?? 0) };
  },
};

const PUSH_SCRIPT = `set -e
remote="$1"; branch="$2"; upstream="$3"; lease="$4"; tags="$5"
if [ -z "$branch" ]; then branch=$(git symbolic-ref --short HEAD); fi
flags=""
if [ "$upstream" = 1 ]; then flags="$flags --set-upstream"; fi
if [ "$lease" = 1 ]; then flags="$flags --force-with-lease"; fi
if [ "$tags" = 1 ]; then flags="$flags --tags"; fi
git push $flags "$remote" "$branch" 2>&1
printf 'trellis-branch=%s\\n' "$branch"
`;

export const gitPushTool: Tool<"git_push"> = {
  async run(input, context) {
    const remote = input.remote ?? "origin";
    const flag = (value: boolean | undefined, fallback: boolean) => ((value ?? fallback) ? "1" : "0");
    const args = [
      remote,
      input.branch ?? "",
      flag(input.set_upstream, true),
      flag(input.force_with_lease, false),
      flag(input.tags, false),
    ];
    const result = await runScript(context, PUSH_SCRIPT, args, { cwd: input.repo });
    const branch = markers(result.stdout).get("branch")?.at(-1);
    if (result.exit_code !== 0 || branch === undefined) {
      throw failed("git.push_failed", `git push to ${remote}`, result);
    }
    return { remote, branch, output: result.stdout.replace(/^trellis-branch=.*\n?/m, "").trimEnd() };
  },
};

const MERGE_SCRIPT = `strategy="$1"; abort="$2"; msg="$3"; branch="$4"
before=$(git rev-parse -q --verify HEAD || true)
printf 'trellis-before=%s\\n' "$before"
case "$strategy" in ff_only) flag="--ff-only";; no_ff) flag="--no-ff";; *) flag="";; esac
if [ -n "$msg" ]; then set -- -m "$msg"; else set -- --no-edit; fi
if git -c commit.gpgsign=false merge $flag "$@" "$branch"; then
  printf 'trellis-after=%s\\n' "$(git rev-parse HEAD)"
  exit 0
fi
code=$?
conflicts=$(git diff --name-only --diff-filter=U)
if [ -z "$conflicts" ]; then exit "$code"; fi
printf '%s\\n' "$conflicts" | while IFS= read -r file; do printf 'trellis-conflict=%s\\n' "$file"; done
if [ "$abort" = 1 ]; then git merge --abort; fi
exit 0
`;

export const gitMergeTool: Tool<"git_merge"> = {
  async run(input, context) {
    const args = [
      input.strategy ?? "merge",
      input.abort_on_conflict === false ? "0" : "1",
      input.message ?? "",
      input.branch,
    ];
    const result = await runScript(context, MERGE_SCRIPT, args, {
      cwd: input.repo,
      env: identity(undefined, undefined),
    });
    if (result.exit_code !== 0) {
      throw failed("git.merge_failed", `git merge ${input.branch}`, result);
    }
    return toMergeOutput(result.stdout);
  },
};

function toMergeOutput(stdout: string): ToolOutput<"git_merge"> {
  const found = markers(stdout);
  const conflicts = found.get("conflict") ?? [];
  const before = found.get("before")?.at(-1) ?? "";
  const after = found.get("after")?.at(-1);
  const commit = after ?? before;
  return {
    merged: conflicts.length === 0 && after !== undefined,
    commit: commit === "" ? null : commit,
    fast_forward: /^Fast-forward$/m.test(stdout),
    conflicts,
  };
}
