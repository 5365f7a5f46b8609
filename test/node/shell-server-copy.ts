import { chmod, copyFile, link, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SOURCES = new URL("../../containers/shell-server/", import.meta.url).pathname;

export type ShellServerCopy = { folder: string; node: string; server: string; remove: () => Promise<void> };

/**
 * This node binary and the shell server's sources, in a fresh folder of the
 * given mode: 0700 stands for a clone only its owner may enter, 0755 lets
 * another uid run the server wherever the repository itself was cloned.
 * Node is hard-linked when it can be (same file system), else copied.
 */
export async function copyShellServer(mode: 0o700 | 0o755): Promise<ShellServerCopy> {
  const folder = await mkdtemp(join(tmpdir(), "trellis-shell-copy-"));
  await chmod(folder, mode);
  const node = join(folder, "node");
  await link(process.execPath, node).catch(() => copyFile(process.execPath, node));
  await mkdir(join(folder, "shell-server"), { mode: 0o755 });
  for (const name of await readdir(SOURCES)) {
    if (name.endsWith(".mjs")) {
      await copyFile(join(SOURCES, name), join(folder, "shell-server", name));
      await chmod(join(folder, "shell-server", name), 0o644);
    }
  }
  return {
    folder,
    node,
    server: join(folder, "shell-server", "server.mjs"),
    remove: () => rm(folder, { recursive: true, force: true }),
  };
}
