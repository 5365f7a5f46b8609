import { EngineError, type ErrorDetail } from "./errors.ts";

/**
 * The limits every API body meets at ingress, over HTTP and Workers RPC alike
 * (docs/api.md#input-limits). They are checked by one iterative walk before anything
 * recursive (zod, canonical JSON, JSON Schema, CEL, JSONPath, the catalog, the
 * coordinator) touches the value, so a hostile body is a 4xx, never a 500 and
 * never a run that breaks later.
 */

/**
 * Request bodies (and RPC arguments, as compact JSON) larger than this are 413 `request.too_large`:
 * 24 MiB, under what one Workers RPC call may carry (32 MiB, which a start's input shares with its
 * snapshot on its way to the run's coordinator) and the Worker's memory (128 MB). A run keeps a
 * large value as a blob (docs/architecture.md, "Blobs"), never inline.
 */
export const MAX_BODY_BYTES = 24 * 1024 * 1024;

/** Bodies read before the caller is known (a webhook delivery before its signature, a link's form): 1 MiB. */
export const MAX_UNAUTHENTICATED_BODY_BYTES = 1_048_576;

/**
 * Definitions (`POST /v1/definitions`): 1 MiB. They are kept inline in the
 * catalog (SQLite rows hold at most 2 MB) and copied into every run's snapshot;
 * large data belongs in a run's input, where it becomes a blob.
 */
export const MAX_DEFINITIONS_BODY_BYTES = 1_048_576;

/**
 * The deepest a body may nest arrays and objects: the body itself is level 1,
 * so `{ "input": [[1]] }` is 3 levels deep. Half the depth a journal entry may
 * have (`MAX_CANONICAL_DEPTH`, 128), which leaves room for what the engine wraps
 * around a value (run and task contexts, journal envelopes); every part of the
 * engine handles values far deeper than either.
 */
export const MAX_BODY_DEPTH = 64;

/** Object keys refused anywhere in a body: `__proto__` would replace a prototype wherever a value is copied by assignment. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__"]);

/** At most this many problems are listed in `details` (the message counts them all). */
export const MAX_LIMIT_DETAILS = 20;

/** The error codes of the ingress limits, in the order of precedence of the top-level code. */
const LIMIT_CODES = ["request.too_deep", "request.invalid_text", "request.reserved_key"] as const;
type LimitCode = (typeof LIMIT_CODES)[number];

interface Frame {
  value: unknown;
  /** How many arrays and objects contain this value (the body itself: 0). */
  depth: number;
  key: string | number | null;
  parent: Frame | null;
}

interface Walk {
  problems: (ErrorDetail & { code: LimitCode })[];
  count: number;
  bytes: number;
}

/**
 * Checks a parsed body (or an RPC argument) against the ingress limits and
 * throws the 4xx {@link EngineError} that names every problem with its path
 * (dotted from the body's root, as validation details are; `basePath` is
 * prepended): 413 `request.too_large` when its compact JSON would exceed
 * {@link MAX_BODY_BYTES}, else 400 `request.too_deep`, `request.invalid_text` (a string or
 * key with a lone UTF-16 surrogate, which is not Unicode text and cannot be
 * signed) or `request.reserved_key`.
 *
 * Iterative, with an explicit stack: it descends no deeper than the limit and
 * stops counting bytes past {@link MAX_BODY_BYTES}, so any value (however deep, wide,
 * shared or cyclic, as structured clone allows over RPC) is checked in bounded
 * time and stack.
 */
export function checkBodyLimits(value: unknown, basePath = ""): void {
  const walk: Walk = { problems: [], count: 0, bytes: 0 };
  const stack: Frame[] = [{ value, depth: 0, key: null, parent: null }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    visit(frame, stack, walk);
    if (walk.bytes > MAX_BODY_BYTES) {
      throw EngineError.terminal("request.too_large", `the body is larger than ${MAX_BODY_BYTES} bytes as JSON`);
    }
  }
  if (walk.problems.length > 0) {
    throw limitError(walk, basePath);
  }
}

/** Checks one value, records its problems and its JSON size, and queues its members in document order. */
function visit(frame: Frame, stack: Frame[], walk: Walk): void {
  const { value } = frame;
  if (typeof value !== "object" || value === null) {
    checkScalar(value, frame, walk);
    return;
  }
  if (frame.depth >= MAX_BODY_DEPTH) {
    report(walk, frame, "request.too_deep", `arrays and objects nest deeper than ${MAX_BODY_DEPTH} levels here`);
    return;
  }
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    // Binary data (only RPC can send it) is not JSON, and is not walked element by element; the schemas refuse it.
    walk.bytes += value.byteLength;
    return;
  }
  const members: Frame[] = [];
  const member = (key: string | number, memberValue: unknown): void => {
    members.push({ value: memberValue, depth: frame.depth + 1, key, parent: frame });
  };
  if (Array.isArray(value)) {
    walk.bytes += 1 + Math.max(value.length, 1);
    if (walk.bytes > MAX_BODY_BYTES) {
      return; // Too large already: the caller refuses it before any member is queued.
    }
    for (let index = 0; index < value.length; index++) {
      member(index, value[index]);
    }
  } else {
    const keys = Object.keys(value);
    walk.bytes += 1 + Math.max(keys.length, 1);
    for (const key of keys) {
      walk.bytes += jsonTextBytes(key) + 1;
      if (!key.isWellFormed()) {
        report(
          walk,
          { value: null, depth: frame.depth + 1, key, parent: frame },
          "request.invalid_text",
          "the key contains a lone UTF-16 surrogate (not Unicode text)",
        );
      } else if (RESERVED_KEYS.has(key)) {
        report(
          walk,
          { value: null, depth: frame.depth + 1, key, parent: frame },
          "request.reserved_key",
          `"${key}" is a reserved key`,
        );
      }
      member(key, Reflect.get(value, key));
    }
  }
  for (let index = members.length - 1; index >= 0; index--) {
    stack.push(members[index] as Frame);
  }
}

/** Strings are checked for lone surrogates; numbers, booleans and null only counted (what is not JSON at all is left to the schemas). */
function checkScalar(value: unknown, frame: Frame, walk: Walk): void {
  if (typeof value === "string") {
    walk.bytes += jsonTextBytes(value);
    if (!value.isWellFormed()) {
      report(walk, frame, "request.invalid_text", "the string contains a lone UTF-16 surrogate (not Unicode text)");
    }
    return;
  }
  walk.bytes += typeof value === "number" || typeof value === "boolean" ? String(value).length : 4;
}

function report(walk: Walk, frame: Frame, code: LimitCode, message: string): void {
  walk.count += 1;
  if (walk.problems.length < MAX_LIMIT_DETAILS) {
    walk.problems.push({ path: pathOf(frame), message, code });
  }
}

function limitError(walk: Walk, basePath: string): EngineError {
  const code =
    LIMIT_CODES.find((candidate) => walk.problems.some((problem) => problem.code === candidate)) ??
    "request.invalid_text";
  const details = walk.problems.map((problem) => ({
    ...problem,
    path: [basePath, problem.path].filter((part) => part.length > 0).join("."),
  }));
  const first = details.find((detail) => detail.code === code) ?? details[0];
  const where = first && first.path.length > 0 ? `${first.path}: ` : "";
  const more = walk.count > 1 ? ` (and ${walk.count - 1} more)` : "";
  return EngineError.terminal(
    code,
    `the body ${LIMIT_SUMMARIES[code]}: ${where}${first?.message ?? ""}${more}`,
    details,
  );
}

const LIMIT_SUMMARIES: Record<LimitCode, string> = {
  "request.too_deep": `nests too deeply (at most ${MAX_BODY_DEPTH} levels of arrays and objects)`,
  "request.invalid_text": "is not well-formed Unicode text",
  "request.reserved_key": "uses a reserved key",
};

/** The dotted path of a frame from the root; lone surrogates in keys are written as `\uXXXX` so the path is text. */
function pathOf(frame: Frame): string {
  const parts: string[] = [];
  for (let at: Frame | null = frame; at !== null && at.key !== null; at = at.parent) {
    parts.push(typeof at.key === "number" ? String(at.key) : escapeLoneSurrogates(at.key));
  }
  return parts.reverse().join(".");
}

function escapeLoneSurrogates(text: string): string {
  return text.isWellFormed()
    ? text
    : text.replace(/\p{Surrogate}/gu, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The UTF-8 bytes of `text` as a JSON string: its quotes, escapes and characters. */
export function jsonTextBytes(text: string): number {
  let bytes = 2;
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit === 0x22 || unit === 0x5c) {
      bytes += 2;
    } else if (unit < 0x20) {
      bytes += unit === 0x08 || unit === 0x09 || unit === 0x0a || unit === 0x0c || unit === 0x0d ? 2 : 6;
    } else if (unit < 0x80) {
      bytes += 1;
    } else if (unit < 0x800) {
      bytes += 2;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      // Half of a 4-byte pair, or a lone surrogate (written `\uXXXX`).
      bytes += isPaired(text, index, unit) ? 2 : 6;
    } else {
      bytes += 3;
    }
  }
  return bytes;
}

function isPaired(text: string, index: number, unit: number): boolean {
  if (unit <= 0xdbff) {
    const next = text.charCodeAt(index + 1);
    return next >= 0xdc00 && next <= 0xdfff;
  }
  const previous = text.charCodeAt(index - 1);
  return previous >= 0xd800 && previous <= 0xdbff;
}
