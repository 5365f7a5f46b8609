import { listArtifactsTool, readArtifactTool, writeArtifactTool } from "./artifacts.ts";
import { deleteFileTool, listFilesTool, readFileTool, writeFileTool } from "./files.ts";
import { gitCommitTool, gitMergeTool, gitPushTool, gitStatusTool } from "./git.ts";
import { installPackagesTool, runBuildTool, runLintTool, runTestsTool, updateDependenciesTool } from "./project.ts";
import type { ToolRegistry } from "./types.ts";

export type { Tool, ToolContext, ToolRegistry } from "./types.ts";

/** The standard library (docs/containers.md, "The `tool` action and the standard library"): one implementation per schema in schemas/tools.ts. */
export const STANDARD_TOOLS = {
  read_file: readFileTool,
  write_file: writeFileTool,
  list_files: listFilesTool,
  delete_file: deleteFileTool,
  git_status: gitStatusTool,
  git_commit: gitCommitTool,
  git_push: gitPushTool,
  git_merge: gitMergeTool,
  run_tests: runTestsTool,
  run_lint: runLintTool,
  run_build: runBuildTool,
  install_packages: installPackagesTool,
  update_dependencies: updateDependenciesTool,
  write_artifact: writeArtifactTool,
  read_artifact: readArtifactTool,
  list_artifacts: listArtifactsTool,
} satisfies ToolRegistry;
