import type { Api, RequestOptions } from "../../cli/api.ts";
import type { Io } from "../../cli/commands.ts";

/**
 * A recording stand-in for the CLI's API: it answers `answers[path]` (any
 * other path is a failed request), records each call as `METHOD path` with
 * its body, and collects what the command prints.
 */
export function recording(
  answers: Record<string, unknown>,
  json = false,
): { io: Io; calls: string[]; bodies: unknown[]; printed: () => string } {
  const calls: string[] = [];
  const bodies: unknown[] = [];
  let printed = "";
  const api = {
    json: (method: string, path: string, options: RequestOptions = {}) => {
      calls.push(`${method} ${path}`);
      bodies.push(options.body);
      return path in answers ? Promise.resolve(answers[path]) : Promise.reject(new Error(`unexpected ${path}`));
    },
  } as unknown as Api;
  const out = { write: (text: string) => ((printed += text), true), isTTY: false } as unknown as NodeJS.WriteStream;
  return { io: { api, json, out }, calls, bodies, printed: () => printed };
}
