import type { RunView } from "../schemas/index.ts";
import type { Api } from "./api.ts";
import { runEntries } from "./events.ts";
import { entryLine, progressOf, TERMINAL } from "./format.ts";

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/** How often the progress line re-reads the run view while entries stream in. */
const VIEW_EVERY_MS = 250;

export interface FollowOptions {
  /** Print each journal entry as a line (`--follow` without a TTY, and `tail`). */
  lines: boolean;
  /** Redraw one progress line in place (`--follow` on a TTY). */
  live: boolean;
  out: NodeJS.WriteStream;
}

/**
 * Watches a run until it ends, from its event stream, and returns its final
 * view. On a TTY one line shows a spinner, the status and the progress
 * (`3/5 nodes  fan 40/100`); elsewhere every entry is a line of its own.
 */
export async function follow(api: Api, runId: string, options: FollowOptions): Promise<RunView> {
  const view = () => api.json<RunView>("GET", `/v1/runs/${encodeURIComponent(runId)}`);
  let latest = await view();
  let fetchedAt = 0;
  let frame = 0;
  const draw = () => {
    frame += 1;
    const spinner = TERMINAL.has(latest.status) ? " " : SPINNER[frame % SPINNER.length];
    options.out.write(`\r\x1b[2K${spinner} ${latest.status.padEnd(9)} ${progressOf(latest)}`);
  };
  const timer = options.live ? setInterval(draw, 100) : undefined;
  try {
    // Lines show the whole journal, even of a run that already ended; the live line only what is left.
    if (options.lines || !TERMINAL.has(latest.status)) {
      for await (const entry of runEntries(api, runId)) {
        if (options.lines) {
          options.out.write(`${entryLine(entry)}\n`);
        }
        if (options.live && Date.now() - fetchedAt > VIEW_EVERY_MS) {
          fetchedAt = Date.now();
          latest = await view();
        }
      }
      latest = await view();
    }
  } finally {
    if (timer) {
      clearInterval(timer);
      draw();
      options.out.write("\n");
    }
  }
  return latest;
}
