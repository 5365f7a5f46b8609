/** A mapping object found in a bundle: which one, where, and the path of the definition part that holds it. */
export interface FoundMapping {
  key: "input_mapping" | "output_mapping";
  mapping: Record<string, unknown>;
  /** Dotted path of the mapping itself (`workflows.0.nodes.a.input_mapping`). */
  path: string;
  /** Dotted path of what holds it (`workflows.0.nodes.a`, `…task.steps.0`). */
  owner: string;
}

/**
 * Every `input_mapping` and `output_mapping` object anywhere in a bundle,
 * raw or parsed, walked without recursion (a deep body cannot exhaust the
 * stack); the checks of registration read mappings through this one walk.
 */
export function mappingsIn(root: unknown): FoundMapping[] {
  const found: FoundMapping[] = [];
  const stack: { value: unknown; path: string }[] = [{ value: root, path: "" }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    if (value === null || typeof value !== "object") {
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      const at = path === "" ? key : `${path}.${key}`;
      if ((key === "input_mapping" || key === "output_mapping") && isObject(item)) {
        found.push({ key, mapping: item, path: at, owner: path });
      }
      stack.push({ value: item, path: at });
    }
  }
  return found;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
