import type { Schema } from "@cfworker/json-schema";
import type { ErrorDetail } from "./errors.ts";
import { MAX_SCHEMA_VALIDATION_DEPTH } from "./json-schema-hooks.ts";
import { walkSchema } from "./json-schema-walk.ts";

// ───────────────────────────── references ─────────────────────────────

/** Keywords whose subschemas apply to the same value as their schema: a cycle through only these never ends. */
const IN_PLACE_KEYWORDS = ["not", "if", "then", "else"] as const;
const IN_PLACE_ARRAY_KEYWORDS = ["allOf", "anyOf", "oneOf"] as const;
const IN_PLACE_MAP_KEYWORDS = ["dependentSchemas", "dependencies"] as const;
/** Keywords whose subschemas apply to a property, a property name or an item: they move into the value. */
const CONSUMING_KEYWORDS = [
  "items",
  "additionalItems",
  "additionalProperties",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
] as const;
const CONSUMING_MAP_KEYWORDS = ["properties", "patternProperties"] as const;

interface Edge {
  readonly target: object;
  /** The keyword path from the source schema, for messages: `allOf.0`, `$ref`. */
  readonly via: string;
}

interface SchemaGraph {
  /** Every schema reachable from the root, in the order first reached. */
  readonly nodes: object[];
  readonly inPlace: Map<object, Edge[]>;
}

/**
 * Every `$ref` reachable from the root must resolve (the validator throws on one that
 * does not), and the graph of subschemas applied to the same value (`allOf`, `anyOf`,
 * `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`, `$ref`) must have no cycle
 * (the validator would recurse until the stack overflows: `{ "if": { "type": "null" },
 * "else": { "$ref": "#" } }` for any value but null) and no chain longer than the
 * validator's nesting limit. A cycle through `properties`, `items` and the like is
 * recursion over the value's structure, which ends with it, and is fine.
 */
export function checkReferences(
  root: object,
  rootPath: string,
  lookup: Record<string, Schema | boolean>,
  walked: Set<object>,
  problems: ErrorDetail[],
): void {
  const paths = pathIndex(root, rootPath);
  const pathOf = (node: object): string => paths.get(node) ?? rootPath;
  const graph = reachableSchemas(root, lookup, pathOf, walked, problems);
  if (problems.length > 0) {
    return;
  }
  findInPlaceCycles(graph, pathOf, problems);
}

/** The dotted path of every object and array in the document (the first path that reaches it). */
function pathIndex(root: object, rootPath: string): Map<object, string> {
  const paths = new Map<object, string>([[root, rootPath]]);
  const stack: [unknown, string][] = [[root, rootPath]];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const [value, path] = entry;
    for (const [key, member] of Object.entries(value as object)) {
      if (member !== null && typeof member === "object" && !paths.has(member)) {
        const memberPath = `${path}.${key}`;
        paths.set(member, memberPath);
        stack.push([member, memberPath]);
      }
    }
  }
  return paths;
}

/** Schemas reachable from `root` through keywords and `$ref`s, each checked once; unresolved `$ref`s are problems. */
function reachableSchemas(
  root: object,
  lookup: Record<string, Schema | boolean>,
  pathOf: (node: object) => string,
  walked: Set<object>,
  problems: ErrorDetail[],
): SchemaGraph {
  const graph: SchemaGraph = { nodes: [root], inPlace: new Map() };
  const seen = new Set<object>([root]);
  for (let index = 0; index < graph.nodes.length; index += 1) {
    const node = graph.nodes[index] as Record<string, unknown>;
    if (!walked.has(node)) {
      // Reached only through a `$ref` into a place no keyword describes (`#/x/y`): checked as any schema.
      walkSchema(node, pathOf(node), problems, walked);
    }
    const { inPlace, consuming } = subschemaEdges(node);
    const ref = resolveRef(node, lookup);
    if (ref === null) {
      problems.push({
        path: `${pathOf(node)}.$ref`,
        message: `"$ref" ${JSON.stringify(node.$ref)} does not resolve to a schema in this document (other documents are not fetched)`,
        code: "schema.unresolved_ref",
      });
    } else if (ref !== undefined) {
      inPlace.push({ target: ref, via: "$ref" });
    }
    graph.inPlace.set(node, inPlace);
    for (const { target } of [...inPlace, ...consuming]) {
      if (!seen.has(target)) {
        seen.add(target);
        graph.nodes.push(target);
      }
    }
  }
  return graph;
}

/** The schema a node's `$ref` names: undefined without one (or when it names a boolean schema), null when it does not resolve. */
function resolveRef(
  node: Record<string, unknown>,
  lookup: Record<string, Schema | boolean>,
): object | null | undefined {
  if (typeof node.$ref !== "string") {
    return undefined;
  }
  // Set (not enumerable) by the library's dereference: the `$ref` resolved against the base URI in scope.
  const absolute = (node as { __absolute_ref__?: unknown }).__absolute_ref__;
  const target = lookup[typeof absolute === "string" ? absolute : node.$ref];
  if (target === undefined) {
    return null;
  }
  return typeof target === "object" ? target : undefined;
}

function subschemaEdges(node: Record<string, unknown>): { inPlace: Edge[]; consuming: Edge[] } {
  const inPlace: Edge[] = [];
  const consuming: Edge[] = [];
  const add = (edges: Edge[], value: unknown, via: string) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      edges.push({ target: value, via });
    }
  };
  for (const keyword of IN_PLACE_KEYWORDS) {
    add(inPlace, node[keyword], keyword);
  }
  for (const keyword of IN_PLACE_ARRAY_KEYWORDS) {
    listOf(node[keyword]).forEach((sub, index) => add(inPlace, sub, `${keyword}.${index}`));
  }
  for (const keyword of IN_PLACE_MAP_KEYWORDS) {
    for (const [key, sub] of entriesOf(node[keyword])) {
      add(inPlace, sub, `${keyword}.${key}`);
    }
  }
  for (const keyword of CONSUMING_KEYWORDS) {
    add(consuming, node[keyword], keyword);
  }
  listOf(node.prefixItems).forEach((sub, index) => add(consuming, sub, `prefixItems.${index}`));
  for (const keyword of CONSUMING_MAP_KEYWORDS) {
    for (const [key, sub] of entriesOf(node[keyword])) {
      add(consuming, sub, `${keyword}.${key}`);
    }
  }
  return { inPlace, consuming };
}

function listOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function entriesOf(value: unknown): [string, unknown][] {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? Object.entries(value) : [];
}

const ON_PATH = 1;
const DONE = 2;

/**
 * A depth-first walk of the in-place edges (iterative: a chain of `$ref`s may be as long
 * as the document allows). A back edge is a cycle; the longest chain is measured on the
 * way back up.
 */
function findInPlaceCycles(graph: SchemaGraph, pathOf: (node: object) => string, problems: ErrorDetail[]): void {
  const state = new Map<object, number>();
  const chain = new Map<object, number>();
  for (const start of graph.nodes) {
    if (state.has(start)) {
      continue;
    }
    state.set(start, ON_PATH);
    const stack: { node: object; next: number }[] = [{ node: start, next: 0 }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { node: object; next: number };
      const edges = graph.inPlace.get(top.node) ?? [];
      const edge = edges[top.next];
      if (edge !== undefined) {
        top.next += 1;
        const seen = state.get(edge.target);
        if (seen === undefined) {
          state.set(edge.target, ON_PATH);
          stack.push({ node: edge.target, next: 0 });
        } else if (seen === ON_PATH) {
          const from = stack.findIndex((frame) => frame.node === edge.target);
          const cycle = [...stack.slice(from).map((frame) => pathOf(frame.node)), pathOf(edge.target)];
          problems.push({
            path: `${pathOf(top.node)}.${edge.via}`,
            message: `this leads back to a schema already being applied to the same value, without moving into a property or an item (${cycle.join(" → ")}): validating would never end`,
            code: "schema.ref_cycle",
          });
        }
        continue;
      }
      const length =
        1 +
        edges.reduce(
          (longest, out) => Math.max(longest, state.get(out.target) === DONE ? (chain.get(out.target) ?? 0) : 0),
          0,
        );
      chain.set(top.node, length);
      state.set(top.node, DONE);
      stack.pop();
      if (length > MAX_SCHEMA_VALIDATION_DEPTH && problems.length === 0) {
        problems.push({
          path: pathOf(top.node),
          message: `subschemas applied to the same value nest ${length} deep here, more than the ${MAX_SCHEMA_VALIDATION_DEPTH} a validation may nest`,
          code: "schema.too_deep",
        });
      }
    }
  }
}
