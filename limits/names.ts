/** How limit objects are named: pure, so the coordinator's decisions (and node tests) read it without the Worker's types. */

/**
 * The object's name: the limit id and the key, which no id contains a `/` of.
 * Each (limit, key) is one object: one key's traffic never queues behind another's.
 */
export function limitObjectName(limitId: string, key: string): string {
  return `${limitId}/${key}`;
}

/** The limit id and key of an object's name (an id never contains `/`). */
export function splitLimitObjectName(name: string): { limit: string; key: string } {
  const slash = name.indexOf("/");
  return { limit: name.slice(0, slash), key: name.slice(slash + 1) };
}
