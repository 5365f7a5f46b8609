import { EngineError } from "../lib/errors.ts";
import { unwrap } from "../lib/result.ts";
import { limitObject } from "../limits/route.ts";
import { DEFINITION_ID_PATTERN } from "../schemas/common.ts";
import { MAX_LIMIT_KEY_CHARS, type LimitStatus } from "../schemas/limits.ts";
import { catalog } from "./service.ts";

/**
 * `GET /v1/limits/{id}/status?key=` (docs/api.md): the slots in use, the
 * waiters and the window of one limit object, the one of (limit, key). No key
 * is the empty key, the one of a limit named without `key`. A limit that is
 * not registered is 404 `limit.not_found`, whatever its objects hold.
 */
export async function limitStatus(env: Env, id: string, key = ""): Promise<LimitStatus> {
  if (key.length > MAX_LIMIT_KEY_CHARS) {
    const message = `is ${key.length} characters; a limit key is at most ${MAX_LIMIT_KEY_CHARS}`;
    throw EngineError.terminal("request.invalid_query", `the query is invalid: key ${message}`, [
      { path: "key", message, code: "limit.key_too_long" },
    ]);
  }
  await assertLimitRegistered(env, id);
  return unwrap(await limitObject(env, id, key).status(id, key));
}

async function assertLimitRegistered(env: Env, id: string): Promise<void> {
  const notFound = EngineError.terminal("limit.not_found", `no limit "${id}" is registered`);
  if (!DEFINITION_ID_PATTERN.test(id)) {
    throw notFound;
  }
  const found = await catalog(env).get("limits", id);
  if (!found.ok && found.error.code === "definition.not_found") {
    throw notFound;
  }
  unwrap(found);
}
