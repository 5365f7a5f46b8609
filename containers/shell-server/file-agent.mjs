/**
 * A workspace's file helper: the shell server starts it with the workspace's
 * own uid (file-agents.mjs) and sends it the file operations of that
 * workspace, so the kernel checks them with that uid's rights, never root's.
 *
 *   node file-agent.mjs <workspace dir>
 *     reads JSON lines `{ n, op, body }` on stdin and answers JSON lines
 *     `{ n, value }` or `{ n, error: { status, code, message } }` on stdout,
 *     in any order; ends when stdin closes.
 *   node file-agent.mjs --probe <root>
 *     prints `ok` when it runs and reaches `<root>` (the server's check at
 *     start that a workspace's uid can do its work).
 */
import { stat } from "node:fs/promises";
import { createInterface } from "node:readline";
import { runFileOperation } from "./files.mjs";

const [first, second] = process.argv.slice(2);
if (first === "--probe") {
  await stat(second ?? "/");
  process.stdout.write("ok\n");
} else if (first !== undefined) {
  const workspace = { dir: first };
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line) => {
    void answer(line, workspace);
  });
}

/**
 * @param {string} line
 * @param {{ dir: string }} workspace
 */
async function answer(line, workspace) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return;
  }
  const n = request?.n;
  if (typeof n !== "number") return;
  const result = await runFileOperation(String(request.op), request.body ?? {}, workspace);
  process.stdout.write(`${JSON.stringify({ n, ...result })}\n`);
}
