import { createHash } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHttpTarget } from "../../scripts/lib/http-target.mjs";

type Target = Awaited<ReturnType<typeof startHttpTarget>>;
let target: Target;

beforeAll(async () => {
  target = await startHttpTarget({ port: 0 });
});
afterAll(async () => {
  await target.close();
});
beforeEach(async () => {
  await fetch(`${target.url}/reset`, { method: "POST" });
});

const hits = async (key: string): Promise<number> =>
  ((await (await fetch(`${target.url}/hits/${encodeURIComponent(key)}`)).json()) as { count: number }).count;

describe("http target", () => {
  it("listens on 127.0.0.1", () => {
    expect(target.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(target.port).toBeGreaterThan(0);
  });

  it("echoes method, path, query, headers and a JSON body", async () => {
    const res = await fetch(`${target.url}/echo?a=1&b=x&b=y`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-custom": "yes" },
      body: JSON.stringify({ hello: "world", n: 1 }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/application\/json/);
    const body = (await res.json()) as Record<string, any>;
    expect(body.method).toBe("POST");
    expect(body.path).toBe("/echo");
    expect(body.query).toEqual({ a: "1", b: ["x", "y"] });
    expect(body.headers["x-custom"]).toBe("yes");
    expect(body.body).toEqual({ hello: "world", n: 1 });
  });

  it("echoes a text body as text, bad JSON as text, and no body as null", async () => {
    const text = (await (await fetch(`${target.url}/echo`, { method: "PUT", body: "plain words" })).json()) as any;
    expect(text.method).toBe("PUT");
    expect(text.body).toBe("plain words");
    const bad = (await (
      await fetch(`${target.url}/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{nope",
      })
    ).json()) as any;
    expect(bad.body).toBe("{nope");
    const none = (await (await fetch(`${target.url}/echo`)).json()) as any;
    expect(none.method).toBe("GET");
    expect(none.body).toBeNull();
  });

  it("builds JSON from the query", async () => {
    const res = await fetch(
      `${target.url}/json?n=42&f=1.5&t=true&z=null&s=hello&o=${encodeURIComponent('{"k":[1]}')}&r=1&r=2`,
    );
    expect(await res.json()).toEqual({ n: 42, f: 1.5, t: true, z: null, s: "hello", o: { k: [1] }, r: [1, 2] });
    expect(await (await fetch(`${target.url}/json`)).json()).toEqual({});
    const proto = await (await fetch(`${target.url}/json?__proto__=1`)).json();
    expect(Object.keys(proto as object)).toEqual(["__proto__"]);
  });

  it("serves users", async () => {
    expect(await (await fetch(`${target.url}/users/42`)).json()).toEqual({
      id: "42",
      name: "User 42",
      active: true,
      repos: ["42-repo-1", "42-repo-2", "42-repo-3"],
    });
    const u = (await (await fetch(`${target.url}/users/ada?active=false&repos=1`)).json()) as any;
    expect(u.active).toBe(false);
    expect(u.repos).toEqual(["ada-repo-1"]);
  });

  it("serves text", async () => {
    const res = await fetch(`${target.url}/text`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await res.text()).toBe("hello from the trellis http target");
    expect(await (await fetch(`${target.url}/text?body=hi`)).text()).toBe("hi");
  });

  it("answers any status with a JSON body, Retry-After on request", async () => {
    const res = await fetch(`${target.url}/status/404?key=s404`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ status: 404 });
    expect(await hits("s404")).toBe(1);
    const busy = await fetch(`${target.url}/status/429/busy?retry_after=2`);
    expect(busy.status).toBe(429);
    expect(busy.headers.get("retry-after")).toBe("2");
    await busy.arrayBuffer();
    expect(await hits("busy")).toBe(1);
    const date = "Wed, 21 Oct 2015 07:28:00 GMT";
    const dated = await fetch(`${target.url}/status/429?retry_after=${encodeURIComponent(date)}`);
    expect(dated.headers.get("retry-after")).toBe(date);
    await dated.arrayBuffer();
    const long = await fetch(`${target.url}/status/429?retry_after=100000000`);
    expect(long.headers.get("retry-after")).toBe("100000000");
    await long.arrayBuffer();
    const junk = await fetch(`${target.url}/status/429?retry_after=soon`);
    expect(junk.headers.get("retry-after")).toBeNull();
    await junk.arrayBuffer();
    expect((await fetch(`${target.url}/status/204`)).status).toBe(204);
    expect((await fetch(`${target.url}/status/abc`)).status).toBe(400);
    expect((await fetch(`${target.url}/status/99`)).status).toBe(400);
  });

  it("fails N times per key, then succeeds", async () => {
    const url = `${target.url}/flaky/k1?fail=2&status=502&retry_after=1`;
    const r1 = await fetch(url);
    expect(r1.status).toBe(502);
    expect(r1.headers.get("retry-after")).toBe("1");
    expect(await r1.json()).toEqual({ error: "flaky", attempt: 1, status: 502 });
    expect((await fetch(url)).status).toBe(502);
    const r3 = await fetch(url);
    expect(r3.status).toBe(200);
    expect(await r3.json()).toEqual({ ok: true, attempts: 3 });
    expect(await hits("k1")).toBe(3);
    // Another key has its own count; the default is one 503.
    const other = await fetch(`${target.url}/flaky/k2`);
    expect(other.status).toBe(503);
    expect(other.headers.get("retry-after")).toBeNull();
    expect((await fetch(`${target.url}/flaky/k2`)).status).toBe(200);
  });

  it("records each request's headers on /record, failing the first ones when asked", async () => {
    const url = `${target.url}/record/r1?fail=1&status=502`;
    const first = await fetch(url, { method: "POST", headers: { "idempotency-key": "one" } });
    expect(first.status).toBe(502);
    expect(await first.json()).toEqual({ error: "record", attempt: 1, status: 502 });
    const second = await fetch(url, { headers: { "idempotency-key": "two" } });
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ ok: true, attempts: 2, headers: { "idempotency-key": "two" } });
    const recorded = (await (await fetch(`${target.url}/recorded/r1`)).json()) as {
      requests: { method: string; headers: Record<string, string> }[];
    };
    expect(recorded.requests.map((r) => [r.method, r.headers["idempotency-key"]])).toEqual([
      ["POST", "one"],
      ["GET", "two"],
    ]);
    // Reading what was recorded is not a request to the key; a reset forgets it.
    expect(await hits("r1")).toBe(2);
    expect((await fetch(`${target.url}/record/r2`)).status).toBe(200);
    await fetch(`${target.url}/reset`, { method: "POST" });
    expect(await (await fetch(`${target.url}/recorded/r1`)).json()).toEqual({ key: "r1", requests: [] });
  });

  it("waits on /slow and counts it", async () => {
    const t0 = Date.now();
    const res = await fetch(`${target.url}/slow/sl?ms=120`);
    expect(await res.json()).toEqual({ waited: 120 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect(await hits("sl")).toBe(1);
    expect(
      await fetch(`${target.url}/slow?ms=999999999&key=cap`, { signal: AbortSignal.timeout(50) }).catch(() => null),
    ).toBeNull();
    expect(await hits("cap")).toBe(1);
  });

  it("counts by header, by /mark, by path, and resets", async () => {
    await fetch(`${target.url}/echo`, { headers: { "x-trellis-hit": "hk" } });
    await fetch(`${target.url}/text`, { headers: { "x-trellis-hit": "hk" } });
    expect(await hits("hk")).toBe(2);
    expect(await (await fetch(`${target.url}/mark/m1`, { method: "POST" })).json()).toEqual({ key: "m1", count: 1 });
    expect(await hits("m1")).toBe(1);
    expect(target.hits("m1")).toBe(1);
    expect(await hits("path:/text")).toBe(1);
    expect(await hits("never")).toBe(0);
    expect(((await (await fetch(`${target.url}/hits`)).json()) as any).counts.hk).toBe(2);
    // /hits and /reset are not counted; /reset is POST only.
    expect((await fetch(`${target.url}/reset`)).status).toBe(405);
    expect(await hits("path:/hits/hk")).toBe(0);
    await fetch(`${target.url}/reset`, { method: "POST" });
    expect(await hits("hk")).toBe(0);
    expect((await fetch(`${target.url}/flaky/k1?fail=1`)).status).toBe(503);
  });

  it("answers the SHA-256 and the length of a body it received", async () => {
    const body = "x".repeat(3 * 1024 * 1024);
    const answer = await (await fetch(`${target.url}/sha256`, { method: "POST", body })).json();
    expect(answer).toEqual({ sha256: createHash("sha256").update(body).digest("hex"), bytes: body.length });
  });

  it("survives bad input", async () => {
    expect((await fetch(`${target.url}/nowhere`)).status).toBe(404);
    // A non-number `fail` falls back to the default of one failure.
    expect((await fetch(`${target.url}/flaky/%E0%A4%A?fail=abc`)).status).toBe(503);
    const big = await fetch(`${target.url}/echo`, { method: "POST", body: "x".repeat(65 * 1024 * 1024) }).catch(
      () => null,
    );
    if (big) {
      expect(big.status).toBe(413);
    }
    // A malformed request line gets a 400 and the server keeps serving.
    const raw = await new Promise<number | undefined>((resolve) => {
      const req = request({
        host: "127.0.0.1",
        port: target.port,
        path: "/echo",
        method: "GET",
        headers: { "bad header": "x" } as any,
      });
      req.on("response", (r) => resolve(r.statusCode));
      req.on("error", () => resolve(undefined));
      req.end();
    }).catch(() => undefined);
    expect(raw === undefined || raw === 400).toBe(true);
    expect((await fetch(`${target.url}/text`)).status).toBe(200);
  });
});
