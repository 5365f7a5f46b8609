import {
  type CelList,
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
import { readingValue } from "./blob-scope.ts";
import { type CelMeter, CEL_STRING_CHARS_PER_COST_UNIT } from "./cel-budget.ts";

// ---------------------------------------------------------------------------
// JSON → CEL

/**
 * `@bufbuild/cel` recognises its maps and lists by these registered symbols (`Symbol.for`),
 * which is what lets the lazy JSON views below take part in evaluation (equality, `size`,
 * comprehensions, `type()`): they implement its `CelMap` and `CelList` but for the
 * unexported brand, hence the casts. Should a later version change the marker, every test
 * that reads a JSON variable fails.
 */
const CEL_MAP_MARK = Symbol.for("@bufbuild/cel/map");

const CEL_LIST_MARK = Symbol.for("@bufbuild/cel/list");

type MapKey = string | bigint | boolean | CelUint | number;

/** A JSON object seen as a CEL `map(string, dyn)`, converting values on access; an `undefined` value is absent. */
class JsonMap {
  readonly [CEL_MAP_MARK] = {};
  /** Counted once: a JSON value is not mutated while an expression reads it, and `size(m)` in a loop must stay O(1). */
  #size: number | undefined;
  readonly raw: Readonly<Record<string, unknown>>;
  constructor(raw: Readonly<Record<string, unknown>>) {
    this.raw = raw;
  }
  get size(): number {
    if (this.#size === undefined) {
      this.#size = 0;
      for (const _ of this.keys()) {
        this.#size += 1;
      }
    }
    return this.#size;
  }
  get(key: MapKey): CelValue | undefined {
    return typeof key === "string" && this.has(key) ? toCelValue(this.raw[key]) : undefined;
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
    for (const key of this.keys()) {
      yield toCelValue(this.raw[key]);
    }
  }
  *entries(): Generator<[string, CelValue], void, undefined> {
    for (const key of this.keys()) {
      yield [key, toCelValue(this.raw[key])];
    }
  }
  forEach(callback: (value: CelValue, key: string, map: CelMap) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) {
      callback.call(thisArg, value, key, this as unknown as CelMap);
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
    return Number.isInteger(index) && index >= 0 && index < this.raw.length ? toCelValue(this.raw[index]) : undefined;
  }
  *values(): Generator<CelValue, void, undefined> {
    for (const value of this.raw) {
      yield toCelValue(value);
    }
  }
  [Symbol.iterator](): Generator<CelValue, void, undefined> {
    return this.values();
  }
}

/** A JSON value (or a `bigint` or `Uint8Array`) as CEL, lazily (above); any other value is not JSON and throws. */
export function toCelValue(value: unknown): CelValue {
  switch (typeof value) {
    case "string":
    case "boolean":
    case "bigint":
      return value;
    case "number":
      return Number.isInteger(value) && value >= -(2 ** 63) && value < 2 ** 63 ? BigInt(value) : value;
    case "undefined": // an array's hole, as in `JSON.stringify`
      return null;
    case "object":
      if (value === null || value instanceof Uint8Array) {
        return value;
      }
      if (Array.isArray(value)) {
        return new JsonList(value) as unknown as CelList;
      }
      readingValue(value);
      if (isPlainObject(value)) {
        return new JsonMap(value) as unknown as CelMap;
      }
      throw new TypeError(`value is not JSON (${Object.prototype.toString.call(value)})`);
    default:
      throw new TypeError(`value is not JSON (${typeof value})`);
  }
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
  return typeof key === "object" ? key.value.toString() : String(key);
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}
