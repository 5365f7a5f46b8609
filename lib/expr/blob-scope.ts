import { isBlobRef } from "../../blobs/ref.ts";
import type { BlobRef } from "../../schemas/blobs.ts";

/**
 * How expressions evaluated in the coordinator see blobs (docs/architecture.md,
 * "Reading blobs lazily"). The coordinator's decisions are pure and synchronous, so
 * they cannot read R2: a decision runs inside a {@link BlobLookup} scope, a run's
 * cache of the blobs read so far. JSONPath, CEL, templates and schema checks see,
 * in place of each reference, its value when the cache has it, or else a stand-in
 * that records the blob as needed and throws the moment anything looks into it.
 * A path that selects a reference whole passes it on without looking in (the
 * stand-in becomes the reference again, {@link rerefOf}). When a decision needed
 * blobs the coordinator drops it, reads them, and decides again (safe: deciding is
 * pure). Outside a scope (the executor, which resolves its payload before running,
 * and every run without blobs) nothing here does any work.
 */
export interface BlobLookup {
  /** A blob's value when it was read (a thrown `blob.corrupt` when it could not be), else undefined. */
  cached(ref: BlobRef): unknown;
  /** Records a blob as needed by this decision. */
  need(ref: BlobRef): void;
}

interface Scope {
  lookup: BlobLookup;
  /** Each value read from a blob, and each stand-in, to the reference it came from. */
  origins: WeakMap<object, BlobRef>;
  /** Blobs whose value is a string, by that string. */
  strings: Map<string, BlobRef>;
  /** The stand-ins of blobs not read yet: each needs its blob when anything reads it. */
  standIns: WeakMap<object, () => never>;
}

let current: Scope | undefined;

/** Runs `work` with `lookup` as the blobs its expressions read. */
export function withBlobLookup<T>(lookup: BlobLookup, work: () => T): T {
  const outer = current;
  current = { lookup, origins: new WeakMap(), strings: new Map(), standIns: new WeakMap() };
  try {
    return work();
  } finally {
    current = outer;
  }
}

/** Whether a scope is active (a run that holds blobs is deciding). */
export function inBlobScope(): boolean {
  return current !== undefined;
}

/** The blob-needed stand-in's message: the decision that met it is dropped, never recorded. */
export class BlobNeeded extends Error {
  readonly digest: string;
  constructor(ref: BlobRef) {
    super(`blob ${ref.$blob} is not read yet`);
    this.digest = ref.$blob;
  }
}

/**
 * `value` as expressions see it: each reference in it replaced by its value when read,
 * else by a stand-in (above). Shares every part without a reference; the same value
 * outside a scope.
 */
export function viewOf(value: unknown): unknown {
  return current === undefined ? value : substitute(value, current, "object");
}

/**
 * The same view with the stand-ins shaped as arrays, or undefined when it would have none.
 * JSONPath looks into an array only through an index and into an object only through a
 * name, and a stand-in cannot be both before its blob is read: a path is tried over this
 * view too (its result dropped), so that an index into a blob not read yet needs it.
 */
export function arrayViewOf(value: unknown): unknown {
  if (current === undefined) {
    return undefined;
  }
  const made = { standIns: 0 };
  const view = substitute(value, current, "array", made);
  return made.standIns === 0 ? undefined : view;
}

type Shape = "object" | "array";

function substitute(value: unknown, scope: Scope, shape: Shape, made?: { standIns: number }): unknown {
  if (typeof value !== "object" || value === null) {
    return value;
  }
  if (isBlobRef(value)) {
    return standIn(value, scope, shape, made);
  }
  let copy: unknown[] | Record<string, unknown> | null = null;
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((member, index) => [index, member])
    : Object.entries(value);
  for (const [key, member] of entries) {
    const seen = substitute(member, scope, shape, made);
    if (seen !== member) {
      copy ??= Array.isArray(value) ? [...value] : { ...value };
      (copy as Record<string | number, unknown>)[key] = seen;
    }
  }
  return copy ?? value;
}

function standIn(ref: BlobRef, scope: Scope, shape: Shape, made?: { standIns: number }): unknown {
  const value = scope.lookup.cached(ref);
  if (value !== undefined) {
    if (typeof value === "object" && value !== null) {
      scope.origins.set(value, ref);
    } else if (typeof value === "string") {
      scope.strings.set(value, ref);
    }
    return value;
  }
  const needed = (): never => {
    scope.lookup.need(ref);
    throw new BlobNeeded(ref);
  };
  if (made !== undefined) {
    made.standIns += 1;
  }
  const proxy = new Proxy(shape === "array" ? [] : { ...ref }, {
    get: needed,
    has: needed,
    ownKeys: needed,
    getOwnPropertyDescriptor: needed,
    set: needed,
  });
  scope.origins.set(proxy, ref);
  scope.standIns.set(proxy, needed);
  return proxy;
}

/**
 * For evaluators that look at a value without reading its members first (CEL takes a
 * map's value before indexing it): a stand-in taken as a value needs its blob now.
 */
export function readingValue(value: object): void {
  current?.standIns.get(value)?.();
}

/**
 * A selected value as it is kept: each part of it that is a blob's value (or stand-in)
 * as its reference again, so that a mapping passing a blob on copies its reference,
 * never its bytes. The same value outside a scope.
 */
export function rerefOf<T>(value: T): T {
  return current === undefined ? value : (reref(value, current) as T);
}

function reref(value: unknown, scope: Scope): unknown {
  if (typeof value === "string") {
    return scope.strings.get(value) ?? value;
  }
  if (typeof value !== "object" || value === null) {
    return value;
  }
  const origin = scope.origins.get(value);
  if (origin !== undefined) {
    return origin;
  }
  let copy: unknown[] | Record<string, unknown> | null = null;
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((member, index) => [index, member])
    : Object.entries(value);
  for (const [key, member] of entries) {
    const kept = reref(member, scope);
    if (kept !== member) {
      copy ??= Array.isArray(value) ? [...value] : { ...value };
      (copy as Record<string | number, unknown>)[key] = kept;
    }
  }
  return copy ?? value;
}
