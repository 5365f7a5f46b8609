import {
  celList,
  type CelList,
  celMap,
  type CelMap,
  type CelUint,
  type CelValue,
  isCelList,
  isCelMap,
  isCelType,
  isCelUint,
} from "@bufbuild/cel";
import { toJson } from "@bufbuild/protobuf";
import { isReflectMessage } from "@bufbuild/protobuf/reflect";
import { EngineError } from "../errors.ts";
import type { CelMeter } from "./cel-budget.ts";
import { CEL_STRING_CHARS_PER_COST_UNIT } from "./cel-budget.ts";

const INT64_MIN = -(2 ** 63);

const INT64_LIMIT = 2 ** 63;

// ---------------------------------------------------------------------------
// JSON → CEL

/**
 * `@bufbuild/cel` recognises its maps and lists by these registered symbols
 * (`Symbol.for`), which is what lets the lazy JSON views below take part in
 * evaluation (equality, `size`, comprehensions, `type()`). The views are checked at
 * load: should a later version change the marker, conversion falls back to eager
 * copies through the library's own `celMap`/`celList` (correct except `has()` on a
 * null value), and the tests of that behaviour fail loudly.
 */
const CEL_MAP_MARK = Symbol.for("@bufbuild/cel/map");

const CEL_LIST_MARK = Symbol.for("@bufbuild/cel/list");

type MapKey = string | bigint | boolean | CelUint | number;

/** A JSON object seen as a CEL `map(string, dyn)`, converting values on access. */
class JsonMap {
  readonly [CEL_MAP_MARK] = {};
  readonly raw: Readonly<Record<string, unknown>>;
  constructor(raw: Readonly<Record<string, unknown>>) {
    this.raw = raw;
  }
  /** Counted once: a JSON value is not mutated while an expression reads it, and `size(m)` in a loop must stay O(1). */
  private counted: number | undefined;
  get size(): number {
    if (this.counted === undefined) {
      let n = 0;
      for (const key of Object.keys(this.raw)) {
        if (this.raw[key] !== undefined) {
          n++;
        }
      }
      this.counted = n;
    }
    return this.counted;
  }
  get(key: MapKey): CelValue | undefined {
    if (typeof key !== "string" || !Object.hasOwn(this.raw, key)) {
      return undefined;
    }
    const value = this.raw[key];
    return value === undefined ? undefined : toCelValue(value);
  }
  has(key: MapKey): boolean {
    return typeof key === "string" && Object.hasOwn(this.raw, key) && this.raw[key] !== undefined;
  }
  *keys(): Generator<string, void, undefined> {
    for (const key of Object.keys(this.raw)) {
      if (this.raw[key] !== undefined) {
        yield key;
      }
    }
  }
  *values(): Generator<CelValue, void, undefined> {
    for (const [, value] of this.entries()) {
      yield value;
    }
  }
  *entries(): Generator<[string, CelValue], void, undefined> {
    for (const key of Object.keys(this.raw)) {
      const value = this.raw[key];
      if (value !== undefined) {
        yield [key, toCelValue(value)];
      }
    }
  }
  forEach(callback: (value: CelValue, key: string, map: CelMap) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) {
      callback.call(thisArg, value, key, asCelMap(this));
    }
  }
  [Symbol.iterator](): Generator<[string, CelValue], void, undefined> {
    return this.entries();
  }
}

/** A JSON array seen as a CEL `list(dyn)`, converting elements on access. */
class JsonList {
  readonly [CEL_LIST_MARK] = {};
  readonly raw: readonly unknown[];
  constructor(raw: readonly unknown[]) {
    this.raw = raw;
  }
  get size(): number {
    return this.raw.length;
  }
  get(index: number): CelValue | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.raw.length) {
      return undefined;
    }
    return toCelValue(this.raw[index] ?? null);
  }
  *values(): Generator<CelValue, void, undefined> {
    for (let i = 0; i < this.raw.length; i++) {
      yield toCelValue(this.raw[i] ?? null);
    }
  }
  [Symbol.iterator](): Generator<CelValue, void, undefined> {
    return this.values();
  }
}

// The views implement the library's interfaces except the unexported brand, whose
// runtime form is the registered symbol above; these casts are the one place that knows.
function asCelMap(view: JsonMap): CelMap {
  return view as unknown as CelMap;
}

function asCelList(view: JsonList): CelList {
  return view as unknown as CelList;
}

const lazyViewsWork = isCelMap(new JsonMap({})) && isCelList(new JsonList([]));

export function toCelValue(value: unknown): CelValue {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isInteger(value) && value >= INT64_MIN && value < INT64_LIMIT ? BigInt(value) : value;
    case "bigint":
      return value;
    case "object":
      if (value === null || value instanceof Uint8Array) {
        return value;
      }
      if (Array.isArray(value)) {
        return lazyViewsWork ? asCelList(new JsonList(value)) : eagerList(value);
      }
      if (isPlainObject(value)) {
        return lazyViewsWork ? asCelMap(new JsonMap(value)) : eagerMap(value);
      }
      throw new TypeError(`value is not JSON (${Object.prototype.toString.call(value)})`);
    default:
      throw new TypeError(`value is not JSON (${typeof value})`);
  }
}

function eagerList(value: readonly unknown[]): CelValue {
  return celList(value.map((element) => toCelValue(element ?? null)));
}

function eagerMap(value: Readonly<Record<string, unknown>>): CelValue {
  const map = new Map<string, CelValue>();
  for (const [key, element] of Object.entries(value)) {
    if (element !== undefined) {
      map.set(key, toCelValue(element));
    }
  }
  return celMap(map);
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// ---------------------------------------------------------------------------
// CEL → JSON (`resultToJson` in `cel.ts` is the boundary)

export function fromCelValue(value: CelValue, meter: CelMeter): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "bigint":
      return intToJson(value);
    case "number":
      if (Number.isFinite(value)) {
        return value;
      }
      return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
    default:
      break;
  }
  if (value === null) {
    return null;
  }
  if (value instanceof JsonMap || value instanceof JsonList) {
    chargeRawJson(value.raw, meter);
    return value.raw;
  }
  if (value instanceof Uint8Array) {
    return bytesToBase64(value);
  }
  if (isCelUint(value)) {
    return intToJson(value.value);
  }
  if (isCelList(value)) {
    meter.charge(value.size);
    return Array.from(value, (element) => fromCelValue(element, meter));
  }
  if (isCelMap(value)) {
    meter.charge(value.size);
    return Object.fromEntries(
      Array.from(value.entries(), ([key, element]) => [mapKeyToJson(key), fromCelValue(element, meter)]),
    );
  }
  if (isCelType(value)) {
    return value.name;
  }
  if (isReflectMessage(value)) {
    return toJson(value.desc, value.message);
  }
  throw new EngineError("expr.eval_failed", "CEL result cannot be represented as JSON");
}

/**
 * An input value returned as is costs what serialising it will: a unit per item or entry
 * and per {@link CEL_STRING_CHARS_PER_COST_UNIT} characters (so `l.map(x, input.big)`
 * cannot hand back thousands of references to one large value). The walk stops at the budget.
 */
function chargeRawJson(raw: unknown, meter: CelMeter): void {
  let units = 0;
  const stack: unknown[] = [raw];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item === "string") {
      units += Math.ceil(item.length / CEL_STRING_CHARS_PER_COST_UNIT);
    } else if (typeof item === "object" && item !== null) {
      const children = Array.isArray(item) ? item : Object.values(item);
      units += children.length;
      stack.push(...children);
    }
    if (units > meter.remaining) {
      break;
    }
  }
  meter.charge(units);
}

function intToJson(value: bigint): number | string {
  const asNumber = Number(value);
  return Number.isSafeInteger(asNumber) ? asNumber : value.toString();
}

function mapKeyToJson(key: string | bigint | boolean | CelUint): string {
  if (typeof key === "string") {
    return key;
  }
  if (typeof key === "bigint" || typeof key === "boolean") {
    return String(key);
  }
  return key.value.toString();
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}
