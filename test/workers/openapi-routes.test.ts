import { describe, it } from "vitest";
import DEFINITIONS_SCHEMA from "../../schemas/json/definitions.schema.json";
import OPENAPI from "../../schemas/json/openapi.json";
import { createApp } from "../../src/app.ts";
import { NOT_API_ROUTES } from "../../src/contracts/routes.ts";
import { api } from "./helpers.ts";

/** `GET /v1/runs/{}`: a route with its parameters unnamed, as Hono (`:run_id`) and OpenAPI (`{run_id}`) both write it. */
function routeKey(method: string, path: string): string {
  // A Hono parameter may carry its pattern (`:kind{(?:workflows|tasks)}`): the route is the same.
  return `${method.toUpperCase()} ${path.replace(/:[A-Za-z_]+(?:\{[^}]*\})?|\{[A-Za-z_]+\}/g, "{}")}`;
}

/** Every route the Hono app registers, by key, as the app writes it (middleware, `app.use`, is method ALL). */
function appRoutes(): Map<string, string> {
  return new Map(
    createApp()
      .routes.filter((route) => route.method !== "ALL")
      .map((route) => [routeKey(route.method, route.path), `${route.method} ${route.path}`]),
  );
}

/** Every route of the OpenAPI document, by key, as the document writes it. */
function documentedRoutes(): Map<string, string> {
  return new Map(
    Object.entries(OPENAPI.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method): [string, string] => [routeKey(method, path), `${method.toUpperCase()} ${path}`]),
    ),
  );
}

describe("the OpenAPI document (schemas/json/openapi.json)", () => {
  it("documents every route of the app, and only those", ({ expect }) => {
    const routed = appRoutes();
    const documented = documentedRoutes();
    const excluded = new Set(NOT_API_ROUTES.map((route) => routeKey(...(route.split(" ") as [string, string]))));
    const undocumented = [...routed].filter(([key]) => !documented.has(key) && !excluded.has(key)).map(([, r]) => r);
    const unrouted = [...documented].filter(([key]) => !routed.has(key)).map(([, route]) => route);
    expect
      .soft(
        undocumented.map((route) => `${route} is routed in src/app.ts but not documented`),
        "add an entry to API_ROUTES in src/contracts/routes.ts (or, for a console page, to NOT_API_ROUTES), then run `npm run schemas`",
      )
      .toEqual([]);
    expect(
      unrouted.map((route) => `${route} is documented but not routed`),
      "remove its entry from API_ROUTES in src/contracts/routes.ts, then run `npm run schemas`",
    ).toEqual([]);
    expect(routed.size).toBeGreaterThan(15);
  });
});

describe("the contracts served", () => {
  it("serve the committed JSON Schema and OpenAPI document without a token, to any origin", async ({ expect }) => {
    for (const [path, committed] of [
      ["/v1/schemas/definitions.json", DEFINITIONS_SCHEMA],
      ["/v1/openapi.json", OPENAPI],
    ] as const) {
      const response = await api("GET", path, undefined, null);
      expect(response.status, path).toBe(200);
      expect(response.json, path).toEqual(committed);
    }
    const raw = await createApp().request("/v1/openapi.json", {}, {} as Env);
    expect(raw.headers.get("access-control-allow-origin")).toBe("*");
    expect(raw.headers.get("content-type")).toMatch(/^application\/json/);
  });

  it("leave the API behind its token", async ({ expect }) => {
    expect((await api("GET", "/v1/runs/run_00000000000000000000000000000000", undefined, null)).status).toBe(401);
  });
});
