/**
 * `cache.set(key, value)`, first dropping the oldest entries (a Map keeps
 * insertion order) so that it never holds more than `limit`. The caches of
 * compiled expressions use it: what a definition can name must not grow an
 * isolate's memory without bound.
 */
export function setBounded<K, V>(cache: Map<K, V>, key: K, value: V, limit: number): void {
  cache.delete(key);
  while (cache.size >= limit) {
    const oldest = cache.keys().next();
    if (oldest.done === true) {
      break;
    }
    cache.delete(oldest.value);
  }
  cache.set(key, value);
}
