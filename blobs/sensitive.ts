import type { Json } from "../schemas/common.ts";
import { isBlobRef } from "./ref.ts";
import type { BlobWriter } from "./offload.ts";

/**
 * `x-trellis-sensitive: true` on a property of a workflow's `input_schema`
 * (docs/definitions.md, "Sensitive input"): that field of a run's input always
 * travels as a blob, whatever its size, so that erasing the run's blobs removes
 * it alone. Properties are found through `properties`, at any depth of objects.
 */
export const SENSITIVE_KEYWORD = "x-trellis-sensitive";

/** The paths (member names from the input's root) of the sensitive properties a schema declares. */
export function sensitivePaths(schema: unknown, at: readonly string[] = [], depth = 0): string[][] {
  if (typeof schema !== "object" || schema === null || depth > 32) {
    return [];
  }
  const properties = (schema as Record<string, unknown>).properties;
  if (typeof properties !== "object" || properties === null || Array.isArray(properties)) {
    return [];
  }
  const paths: string[][] = [];
  for (const [name, property] of Object.entries(properties)) {
    const path = [...at, name];
    if (
      typeof property === "object" &&
      property !== null &&
      (property as Record<string, unknown>)[SENSITIVE_KEYWORD] === true
    ) {
      paths.push(path);
    } else {
      paths.push(...sensitivePaths(property, path, depth + 1));
    }
  }
  return paths;
}

/** The input with each sensitive field present stored as a blob (a copy along the paths changed). */
export async function sensitiveAsBlobs(input: Json, paths: readonly string[][], write: BlobWriter): Promise<Json> {
  let result = input;
  for (const path of paths) {
    result = await replaceAt(result, path, write);
  }
  return result;
}

async function replaceAt(value: Json, path: readonly string[], write: BlobWriter): Promise<Json> {
  const [head, ...rest] = path;
  if (head === undefined) {
    return isBlobRef(value) ? value : write(value);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value) || !Object.hasOwn(value, head)) {
    return value;
  }
  const member = value[head] as Json;
  const replaced = await replaceAt(member, rest, write);
  return replaced === member ? value : { ...value, [head]: replaced };
}
