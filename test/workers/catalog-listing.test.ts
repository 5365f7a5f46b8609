import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { encodeCursor } from "../../catalog/listing.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { DefinitionList, DefinitionVersions, ErrorBody } from "../../schemas/index.ts";
import { api, uniqueId } from "./helpers.ts";

const task = (id: string, value = "1", description?: string) => ({
  id,
  ...(description === undefined ? {} : { description }),
  steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: value }] } } }],
});

async function register(bundle: Record<string, unknown>): Promise<void> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 201) {
    throw new Error(`registration failed: ${JSON.stringify(response.json)}`);
  }
}

/** Every page of a listing, followed through its cursors; each page checked against the response schema. */
async function allPages(path: string, limit: number): Promise<{ pages: number; items: DefinitionList["definitions"] }> {
  const items: DefinitionList["definitions"] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `?limit=${limit}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
    const response = await api("GET", `${path}${query}`);
    if (response.status !== 200) {
      throw new Error(`${path}${query}: ${response.status} ${JSON.stringify(response.json)}`);
    }
    const page = path.endsWith("/versions")
      ? toList(DefinitionVersions.parse(response.json))
      : DefinitionList.parse(response.json);
    items.push(...page.definitions);
    cursor = page.next_cursor;
    pages += 1;
  } while (cursor !== null);
  return { pages, items };
}

const toList = (page: DefinitionVersions): DefinitionList => ({
  definitions: page.versions,
  next_cursor: page.next_cursor,
});

/** The 4xx of a request, its body checked against the error schema. */
async function problem(path: string): Promise<{ status: number; code: string; paths: string[] }> {
  const response = await api("GET", path);
  const body = ErrorBody.parse(response.json);
  return {
    status: response.status,
    code: body.error.code,
    paths: (body.error.details ?? []).map((detail) => detail.path),
  };
}

describe("GET /v1/{kind}", () => {
  it("lists the latest version of each definition, newest first, a page at a time", async ({ expect }) => {
    // The catalog is shared by every test: this test's definitions are told apart by their ids.
    const prefix = uniqueId("list");
    const ids = [0, 1, 2, 3, 4].map((n) => `${prefix}-${n}`);
    for (const id of ids) {
      await register({ tasks: [task(id)] });
    }
    await register({ tasks: [task(ids[1] ?? "", "2", "the second, changed")] });

    const { items, pages } = await allPages("/v1/tasks", 2);
    const mine = items.filter((item) => item.id.startsWith(prefix));
    // One item per id: ids[1] at its new version, registered last; the rest at version 1.
    expect(new Set(mine.map((item) => item.id))).toEqual(new Set(ids));
    const changed = mine.find((item) => item.id === ids[1]);
    expect(changed).toMatchObject({ kind: "tasks", version: 2, description: "the second, changed" });
    expect(mine.filter((item) => item !== changed).every((item) => item.version === 1 && !item.description)).toBe(true);
    expect(mine.every((item) => item.created_at <= (changed?.created_at ?? ""))).toBe(true);
    expect(pages).toBeGreaterThanOrEqual(3);
    // Every definition once, in order: newest first, ties by id (descending).
    const keys = items.map((item) => `${item.created_at} ${item.id}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual([...keys].sort().reverse());
  });

  it("orders definitions registered together by id, and pages through them without gaps", async ({ expect }) => {
    const prefix = uniqueId("tie");
    const ids = ["c", "a", "e", "b", "d"].map((suffix) => `${prefix}-${suffix}`);
    await register({ tasks: ids.map((id) => task(id)) });
    const { items } = await allPages("/v1/tasks", 1);
    const mine = items.filter((item) => item.id.startsWith(prefix));
    expect(mine.map((item) => item.id)).toEqual([...ids].sort().reverse());
    expect(new Set(mine.map((item) => item.created_at)).size).toBe(1);
  });

  it("answers every kind, with the default page size, and kinds written with a hyphen", async ({ expect }) => {
    const server = uniqueId("srv");
    await register({ mcp_servers: [{ id: server, url: "http://127.0.0.1:1/mcp" }] });
    for (const kind of ["workflows", "tasks", "actions", "prompts", "models", "mcp_servers"]) {
      const response = await api("GET", `/v1/${kind}`);
      expect(response.status, kind).toBe(200);
      expect(DefinitionList.parse(response.json).definitions.length).toBeLessThanOrEqual(50);
    }
    const hyphen = await allPages("/v1/mcp-servers", 100);
    expect(hyphen.items.find((item) => item.id === server)).toMatchObject({ kind: "mcp_servers", version: 1 });
  });
});

describe("GET /v1/{kind}/{id}/versions", () => {
  it("lists every version, highest first, a page at a time", async ({ expect }) => {
    const id = uniqueId("ver");
    for (const value of ["1", "2", "3", "4", "5"]) {
      await register({ tasks: [task(id, value, `v${value}`)] });
    }
    const { items, pages } = await allPages(`/v1/tasks/${id}/versions`, 2);
    expect(pages).toBe(3);
    expect(items.map((item) => item.version)).toEqual([5, 4, 3, 2, 1]);
    expect(items.map((item) => item.description)).toEqual(["v5", "v4", "v3", "v2", "v1"]);
    expect(items.every((item) => item.kind === "tasks" && item.id === id)).toBe(true);
    const one = await api("GET", `/v1/tasks/${id}/versions?limit=5`);
    expect(DefinitionVersions.parse(one.json).next_cursor).toBeNull();
  });

  it("answers 404 definition.not_found for an id with no version, like GET /v1/{kind}/{id}", async ({ expect }) => {
    expect(await problem(`/v1/tasks/${uniqueId("nope")}/versions`)).toEqual({
      status: 404,
      code: "definition.not_found",
      paths: [],
    });
    for (const path of ["/v1/gadgets", "/v1/gadgets/x/versions"]) {
      expect(await problem(path), path).toMatchObject({ status: 404, code: "route.not_found" });
    }
  });
});

describe("listing queries", () => {
  it("refuses a bad limit with 400 and the path of the problem", async ({ expect }) => {
    for (const limit of ["0", "101", "-1", "1.5", "ten", "", "1000"]) {
      expect(await problem(`/v1/workflows?limit=${limit}`), limit).toEqual({
        status: 400,
        code: "request.invalid_query",
        paths: ["limit"],
      });
    }
    expect(await problem(`/v1/workflows?colour=red`)).toMatchObject({ status: 400, code: "request.invalid_query" });
  });

  it("refuses a cursor it did not issue, or one of another listing, with 400 request.invalid_cursor", async ({
    expect,
  }) => {
    const id = uniqueId("cur");
    await register({ tasks: [task(id), task(`${id}-b`)] });
    await register({ tasks: [task(id, "2")] });
    const ofVersions = DefinitionVersions.parse((await api("GET", `/v1/tasks/${id}/versions?limit=1`)).json);
    const ofKind = encodeCursor({ kind: "tasks", created_at: "2026-01-01T00:00:00.000Z", id });
    const cases = [
      ["/v1/tasks?cursor=not-a-cursor", "not base64url JSON"],
      ["/v1/tasks?cursor=%F0%9F%92%A5", "not base64url"],
      [`/v1/tasks?cursor=${encodeCursor({ kind: "tasks", created_at: 1, id } as never)}`, "wrong shape"],
      [`/v1/workflows?cursor=${ofKind}`, "another kind"],
      [`/v1/tasks?cursor=${ofVersions.next_cursor ?? ""}`, "a versions cursor on a kind listing"],
      [`/v1/tasks/${id}-b/versions?cursor=${ofVersions.next_cursor ?? ""}`, "another id's versions"],
      [`/v1/tasks/${id}/versions?cursor=${ofKind}`, "a kind cursor on a versions listing"],
    ] as const;
    for (const [path, what] of cases) {
      expect(await problem(path), what).toEqual({ status: 400, code: "request.invalid_cursor", paths: ["cursor"] });
    }
  });

  it("needs a token, like every /v1 route", async ({ expect }) => {
    for (const path of ["/v1/workflows", "/v1/workflows/x/versions"]) {
      const response = await api("GET", path, undefined, null);
      expect(response.status, path).toBe(401);
    }
  });
});

describe("the listings over Workers RPC", () => {
  it("answer like the HTTP routes, and refuse bad page arguments as data", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const id = uniqueId("rpc-list");
    await register({ tasks: [task(id, "1")] });
    await register({ tasks: [task(id, "2")] });
    const first = await rpc.listVersions("tasks", id, { limit: 1 });
    if (!first.ok) {
      throw new Error(first.error.message);
    }
    expect(first.value.versions.map((item) => item.version)).toEqual([2]);
    const rest = await rpc.listVersions("tasks", id, { cursor: first.value.next_cursor ?? "" });
    expect(rest.ok && rest.value.versions.map((item) => item.version)).toEqual([1]);
    const listed = await rpc.listDefinitions("tasks", { limit: 100 });
    expect(listed.ok).toBe(true);
    for (const [page, path] of [
      [{ limit: 0 }, "page.limit"],
      [{ limit: "5" }, "page.limit"],
      [{ colour: "red" }, "page.colour"],
      ["all", "page"],
    ] as const) {
      const refused = await rpc.listDefinitions("tasks", page as never);
      expect(refused.ok ? null : refused.error.details?.[0]?.path, JSON.stringify(page)).toBe(path);
    }
  });
});
