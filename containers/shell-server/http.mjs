/**
 * The shell server's HTTP plumbing (server.mjs describes the API): JSON bodies
 * in, JSON answers out, and the one error type that routes throw, answered as
 * `{ "error": { "code", "message" } }`.
 */

/** Largest request body (a base64 file write): 48 MiB. */
export const MAX_BODY_BYTES = 48 * 1024 * 1024;

export class RequestError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * The answer an error deserves: a RequestError as it is, a file system error
 * by its errno code, anything else a 500.
 * @param {unknown} err
 * @returns {RequestError}
 */
export function toRequestError(err) {
  if (err instanceof RequestError) return err;
  const code = /** @type {NodeJS.ErrnoException} */ (err)?.code;
  const message = String(/** @type {Error} */ (err)?.message ?? err);
  if (code === "ENOENT") return new RequestError(404, "no_such_file", message);
  if (code === "EISDIR") return new RequestError(400, "is_a_directory", message);
  if (code === "ENOTDIR") return new RequestError(400, "not_a_directory", message);
  if (code === "EACCES" || code === "EPERM") return new RequestError(403, "permission_denied", message);
  return new RequestError(500, "internal", message);
}

/**
 * @param {unknown} value
 * @param {string} name
 * @param {number} min
 * @param {number} max
 */
export function optionalInt(value, name, min, max) {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new RequestError(400, "bad_request", `\`${name}\` must be an integer from ${min} to ${max}`);
  }
  return value;
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {string} code
 * @param {string} message
 */
export function unauthorized(res, code, message) {
  return sendError(res, 401, code, message, { "www-authenticate": "Bearer" });
}

/**
 * @param {import("node:http").IncomingMessage} req
 * @returns {Promise<Record<string, unknown>>}
 */
export function readJsonBody(req) {
  return new Promise((resolveBody, reject) => {
    /** @type {Buffer[]} */
    const chunks = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk) => {
      if (failed) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        failed = true;
        reject(new RequestError(413, "too_large", `request bodies are limited to ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (failed) return;
      const text = Buffer.concat(chunks).toString("utf8");
      if (text.trim() === "") return resolveBody({});
      try {
        const value = JSON.parse(text);
        if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("not an object");
        resolveBody(value);
      } catch {
        reject(new RequestError(400, "bad_request", "the body must be a JSON object"));
      }
    });
    req.on("error", reject);
  });
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {unknown} value
 * @param {Record<string, string>} [headers]
 */
export function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {string} code
 * @param {string} message
 * @param {Record<string, string>} [headers]
 */
export function sendError(res, status, code, message, headers = {}) {
  sendJson(res, status, { error: { code, message } }, headers);
}
