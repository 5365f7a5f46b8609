/**
 * Who may enter a workspace: token digests and the comparison of a request's
 * bearer token with them, and the registrations kept on disk under the root
 * (`<root>/.registry/<encoded id>`: the token's SHA-256, never the token).
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { decodeWorkspaceId, encodeWorkspaceId, REGISTRY_DIR } from "./paths.mjs";

/**
 * @typedef {{ digest: Buffer, uid?: number, ready?: Promise<void>, prepared?: Promise<void>, closing?: boolean, deleting?: Promise<{ deleted: boolean }> }} Registration
 *   `digest`: the SHA-256 of the workspace's token; `uid`: its own uid (and
 *   gid) when the server isolates workspaces; `ready`: settles when the
 *   registration is complete; `prepared`: settles when its directories are
 *   made and handed to its uid; `closing` and `deleting`: it is being
 *   deleted (it stays registered until that is done, refusing work).
 * @typedef {import("./workspaces.mjs").Context} Context
 */

/** @param {string} text */
export function sha256(text) {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * The SHA-256 of the bearer token a request carries, or undefined.
 * @param {string | undefined} header
 */
export function bearerDigest(header) {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match?.[1] ? sha256(match[1]) : undefined;
}

/**
 * Digests have equal length, so the comparison takes the same time whatever was sent.
 * @param {Buffer | undefined} presented
 * @param {Buffer} expected
 */
export function digestsEqual(presented, expected) {
  return presented !== undefined && timingSafeEqual(presented, expected);
}

/**
 * Reads the registrations kept under `root`: one file per workspace, named by
 * its encoded id, holding the hex SHA-256 of its token and, when workspaces
 * have their own uids, the uid (`<hex> <uid>`).
 * @param {string} root
 * @returns {Promise<Map<string, Registration>>}
 */
export async function loadRegistry(root) {
  const dir = join(root, REGISTRY_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  /** @type {Map<string, Registration>} */
  const registry = new Map();
  for (const name of await readdir(dir)) {
    const id = decodeWorkspaceId(name);
    const match = /^([0-9a-f]{64})(?: (\d{1,10}))?$/.exec(
      (await readFile(join(dir, name), "utf8").catch(() => "")).trim(),
    );
    if (id === undefined || !match) continue;
    const uid = match[2] === undefined ? undefined : Number(match[2]);
    registry.set(id, { digest: Buffer.from(match[1] ?? "", "hex"), ...(uid === undefined ? {} : { uid }) });
  }
  return registry;
}

/**
 * @param {string} root
 * @param {string} id
 * @param {Registration} entry
 */
export async function saveRegistration(root, id, entry) {
  const file = join(root, REGISTRY_DIR, encodeWorkspaceId(id));
  const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  const uid = entry.uid === undefined ? "" : ` ${entry.uid}`;
  await writeFile(temporary, `${entry.digest.toString("hex")}${uid}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

/**
 * What a uid claim names: this root and the workspace.
 * @param {Context} context
 * @param {string} id
 */
export function claimOwner(context, id) {
  return `${context.root}\t${encodeWorkspaceId(id)}`;
}
