/**
 * The console's pages by address: `/` (runs, filters in the query string),
 * `/runs/{run_id}`, `/gates` (open gates across runs), `/workflows`,
 * `/workflows/{id}`, `/schedules` and `/limits` (its query may name one
 * limit and a key to look up: `?limit=api-quota&key=acme`); anything else is
 * not found. Pure, so it is unit-tested (test/node/console.test.ts).
 */
export type Route =
  | { page: "runs"; query: URLSearchParams }
  | { page: "run"; runId: string }
  | { page: "gates" }
  | { page: "workflows" }
  | { page: "schedules" }
  | { page: "limits"; query: URLSearchParams }
  | { page: "workflow"; id: string }
  | { page: "not_found"; path: string };

/** The route of a path and query string. */
export function parseRoute(pathname: string, search: string): Route {
  let parts: string[];
  try {
    parts = pathname
      .split("/")
      .filter((part) => part !== "")
      .map((part) => decodeURIComponent(part));
  } catch {
    return { page: "not_found", path: pathname }; // a malformed %-escape
  }
  const [first, second, ...rest] = parts;
  if (first === undefined) {
    return { page: "runs", query: new URLSearchParams(search) };
  }
  if (first === "runs" && second !== undefined && rest.length === 0) {
    return { page: "run", runId: second };
  }
  if (first === "gates" && second === undefined) {
    return { page: "gates" };
  }
  if (first === "schedules" && second === undefined) {
    return { page: "schedules" };
  }
  if (first === "limits" && second === undefined) {
    return { page: "limits", query: new URLSearchParams(search) };
  }
  if (first === "workflows" && second === undefined) {
    return { page: "workflows" };
  }
  if (first === "workflows" && second !== undefined && rest.length === 0) {
    return { page: "workflow", id: second };
  }
  return { page: "not_found", path: pathname };
}

/** The Limits page showing `limit`'s status for `key` beside its status for the key `""`. */
export function limitHref(limit: string, key: string): string {
  return `/limits?${new URLSearchParams({ limit, key }).toString()}`;
}
