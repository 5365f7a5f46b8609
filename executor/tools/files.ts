import type { Tool } from "./types.ts";

/** Files read into a context are capped by default: contexts travel and are stored. */
export const DEFAULT_READ_MAX_BYTES = 1024 * 1024;

export const readFileTool: Tool<"read_file"> = {
  run: (input, context) =>
    context.sandbox().readFile({
      path: input.path,
      encoding: input.encoding ?? "utf8",
      max_bytes: input.max_bytes ?? DEFAULT_READ_MAX_BYTES,
    }),
};

export const writeFileTool: Tool<"write_file"> = {
  run: (input, context) => context.sandbox().writeFile(input),
};

export const listFilesTool: Tool<"list_files"> = {
  run: (input, context) => context.sandbox().listFiles(input),
};

export const deleteFileTool: Tool<"delete_file"> = {
  run: (input, context) => context.sandbox().deleteFile(input),
};
