/**
 * Property-based fuzzing of every route (HTTP and Workers RPC) with hostile
 * bodies, definitions, ids, query strings and content types. Each property
 * asserts: never a 5xx (over RPC: never an error code whose status is 5xx,
 * never a throw), always the documented error body on a 4xx; the last test
 * checks that the server is healthy afterwards.
 *
 * `npm test` runs a fixed-seed slice (a few seconds). `npm run fuzz` runs many
 * more cases from a random seed, printed first; replay a failure with
 * `FUZZ_SEED=<seed> npm run fuzz` (and `FUZZ_RUNS=<n>` for the runs per property).
 */
import { env, exports } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { verifyJournal } from "../../lib/journal/index.ts";
import type { Result } from "../../lib/result.ts";
import { ErrorBody } from "../../schemas/index.ts";
import { statusOf } from "../../src/errors.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import {
  bodyEncoding,
  bodyText,
  computeCorpus,
  definitionCorpus,
  hostileJson,
  hostileString,
  materialize,
  mutate,
  mutation,
  pathSegment,
  percentEncode,
  queryString,
  type BodyEncoding,
} from "./fuzz-arbitraries.ts";
import { registerWorkflow, TOKEN, api, TERMINAL, waitForRun, register, start } from "./helpers.ts";

/** `npm run fuzz` passes its settings as VITE_* variables, which vitest exposes to the Worker's tests. */
const fuzzEnv = (import.meta as unknown as { env: Record<string, string | undefined> }).env;
const LONG = fuzzEnv.VITE_FUZZ_LONG === "1";
/** The slice's fixed seed; the long run draws one (or takes FUZZ_SEED). */
const SEED = fuzzEnv.VITE_FUZZ_SEED
  ? Number(fuzzEnv.VITE_FUZZ_SEED)
  : LONG
    ? Math.floor(Math.random() * 2 ** 31)
    : 20261124;
/** Runs per property: the slice's own counts, or FUZZ_RUNS (default 400) each in the long run. */
const LONG_RUNS = Number(fuzzEnv.VITE_FUZZ_RUNS || 400);
const runs = (slice: number) => (LONG ? LONG_RUNS : slice);
const TIMEOUT_MS = LONG ? 3_600_000 : 60_000;

const DOTTED_CODE = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/;
const JSON_BODY: BodyEncoding = { format: "json", contentType: "application/json", raw: "" };

interface World {
  /** Workflows any mode may run: their actions only compute. */
  safeId: string;
  gatedId: string;
  /** A gate that takes any answer: what it accepts flows into the task, its mappings and the journal. */
  openGateId: string;
  /** Registered from the corpus: only previewed or created for approval, never run. */
  corpusIds: string[];
  corpus: Record<string, unknown>[];
  computeCorpus: Record<string, unknown>[];
  /** The run the health check finishes: waits at a gate whose answer the fuzz cannot guess. */
  target: { runId: string; gateId: string; token: string };
  /** Runs the control routes may do anything to. */
  victims: string[];
  victimGate: { runId: string; gateId: string };
  completedRunId: string;
  /** Runs the properties started; `mustEnd` for those that run by themselves (not drafts, not waiting at the gated workflow's gate). */
  startedRuns: Map<string, { mustEnd: boolean }>;
}

let world: World;
/** What the properties got back, by route family, status and code: printed at the end, to see how deep the fuzz reached. */
const seen = new Map<string, number>();
let family = "";

function tally(outcome: string): void {
  const key = `${family} ${outcome}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
}

beforeAll(async () => {
  console.log(
    `fuzz seed: ${SEED} (replay: FUZZ_SEED=${SEED} npm run fuzz)${LONG ? `, ${LONG_RUNS} runs per property` : " (fixed-seed slice)"}`,
  );
  const started = Date.now();
  world = await setUp();
  console.log(`fuzz setup: ${Date.now() - started} ms`);
}, 60_000);

describe("fuzz: hostile input at every route never gets a 5xx", () => {
  it("POST /v1/definitions: mutated and random bundles, in every encoding", { timeout: TIMEOUT_MS }, async () => {
    const bundle = fc.oneof(
      {
        weight: 3,
        arbitrary: fc
          .tuple(fc.nat(), fc.array(mutation, { minLength: 1, maxLength: 4 }))
          .map(([which, mutations]) => mutate(world.corpus[which % world.corpus.length], mutations)),
      },
      { weight: 1, arbitrary: hostileJson },
      {
        weight: 1,
        arbitrary: fc.dictionary(
          fc.constantFrom("workflows", "tasks", "actions", "prompts", "models", "mcp_servers"),
          fc.array(hostileJson, { maxLength: 3 }),
          { noNullPrototype: true },
        ),
      },
    );
    await check(
      fc.asyncProperty(bundle, bodyEncoding, async (body, encoding) => {
        await send("POST", "/v1/definitions", bodyText(body, encoding), encoding);
      }),
      60,
    );
  });

  it(
    "POST /v1/workflows/{id}/runs: hostile inputs, idempotency keys, versions and modes",
    { timeout: TIMEOUT_MS },
    async () => {
      // Mostly well-formed requests with hostile input (so runs start and compute over it); sometimes hostile everywhere.
      const field = <T>(arbitrary: fc.Arbitrary<T>, weight = 1) =>
        fc.oneof({ weight: 6 - weight, arbitrary: fc.constant(undefined) }, { weight, arbitrary });
      const request = (modes: fc.Arbitrary<unknown>) =>
        fc.record(
          {
            input: field(hostileJson, 5),
            version: field(fc.oneof(fc.constantFrom(1, 2, 0, -1, 1.5, 2 ** 53, 1e308), hostileString)),
            idempotency_key: field(fc.oneof(fc.constantFrom("k", "k2"), hostileString), 2),
            mode: modes,
          },
          { noNullPrototype: true },
        );
      const anyMode = field(fc.oneof(fc.constantFrom("auto", "approval", "preview"), hostileString), 2);
      const start = fc.oneof(
        {
          weight: 4,
          arbitrary: fc.tuple(fc.constantFrom(world.safeId, world.gatedId), request(anyMode), bodyEncoding),
        },
        // Corpus workflows call out (http, llm, shell): they are only previewed or drafted.
        {
          weight: 1,
          arbitrary: fc.tuple(
            fc.constantFrom(...world.corpusIds),
            request(fc.constantFrom("preview", "approval")),
            bodyEncoding.map((encoding) => ({ ...encoding, format: "json" as const })),
          ),
        },
        { weight: 1, arbitrary: fc.tuple(pathSegment, request(anyMode), bodyEncoding) },
      );
      await check(
        fc.asyncProperty(start, async ([workflow, body, encoding]) => {
          const answer = await send("POST", `/v1/workflows/${workflow}/runs`, bodyText(body, encoding), encoding);
          if (answer.status < 300 && typeof answer.json?.run_id === "string") {
            world.startedRuns.set(answer.json.run_id, {
              mustEnd: workflow === world.safeId && answer.json.status !== "drafting",
            });
          }
        }),
        50,
      );
    },
  );

  it(
    "POST /v1/definitions then a run: mutated compute-only workflows (hostile CEL, JSONPath, templates) run to an end",
    { timeout: TIMEOUT_MS },
    async () => {
      const mutated = fc.tuple(
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        fc.oneof(
          hostileJson,
          fc.record({ n: fc.integer(), items: fc.array(hostileJson, { maxLength: 5 }) }, { noNullPrototype: true }),
        ),
      );
      await check(
        fc.asyncProperty(mutated, async ([mutations, input]) => {
          const bundle = mutate(world.computeCorpus[0], mutations);
          const registered = await send("POST", "/v1/definitions", JSON.stringify(bundle) ?? "", JSON_BODY);
          const workflows: unknown =
            typeof bundle === "object" && bundle !== null ? Reflect.get(bundle, "workflows") : undefined;
          const id: unknown =
            Array.isArray(workflows) && typeof workflows[0] === "object" && workflows[0] !== null
              ? Reflect.get(workflows[0], "id")
              : undefined;
          if (registered.status === 201 && typeof id === "string" && id.startsWith("fz-compute-")) {
            const started = await send(
              "POST",
              `/v1/workflows/${id}/runs`,
              JSON.stringify({ input: materialize(input, 0) }),
              JSON_BODY,
            );
            if (started.status === 201) {
              world.startedRuns.set(started.json.run_id, { mustEnd: true });
            }
          }
        }),
        15,
      );
    },
  );

  it("POST /v1/events: hostile events, batches and names", { timeout: TIMEOUT_MS }, async () => {
    const event = fc.oneof(
      fc.record(
        {
          name: fc.oneof(hostileString, fc.constantFrom("order.paid", "__proto__", "a#1", "")),
          data: fc.option(hostileJson, { nil: undefined }),
          id: fc.option(hostileString, { nil: undefined }),
        },
        { noNullPrototype: true, requiredKeys: ["name"] },
      ),
      hostileJson,
    );
    const body = fc.oneof(
      event,
      fc.record({ events: fc.array(event, { maxLength: 30 }) }, { noNullPrototype: true }),
      hostileJson,
    );
    await check(
      fc.asyncProperty(body, bodyEncoding, async (value, encoding) => {
        await send("POST", "/v1/events", bodyText(value, encoding), encoding);
      }),
      30,
    );
  });

  it(
    "POST /v1/runs/{id}/gates/{gate_id}: hostile answers to open, answered and unknown gates",
    { timeout: TIMEOUT_MS },
    async () => {
      const route = fc.oneof(
        fc.constant(`/v1/runs/${world.target.runId}/gates/${world.target.gateId}`),
        fc.constant(`/v1/runs/${world.victimGate.runId}/gates/${world.victimGate.gateId}`),
        pathSegment.map((gate) => `/v1/runs/${world.target.runId}/gates/${gate}`),
        fc.tuple(pathSegment, pathSegment).map(([run, gate]) => `/v1/runs/${run}/gates/${gate}`),
      );
      const answer = fc.oneof(
        fc.record(
          { response: hostileJson, responder: fc.option(hostileString, { nil: undefined }) },
          { noNullPrototype: true },
        ),
        hostileJson,
      );
      await check(
        fc.asyncProperty(route, answer, bodyEncoding, async (path, body, encoding) => {
          await send("POST", path, bodyText(body, encoding), encoding);
        }),
        40,
      );
    },
  );

  it(
    "POST /v1/runs/{id}/gates/{gate_id}: hostile answers a gate accepts flow through the run, which ends",
    { timeout: TIMEOUT_MS },
    async () => {
      const answer = fc.record(
        { response: hostileJson, responder: fc.option(hostileString, { nil: undefined }) },
        { noNullPrototype: true },
      );
      await check(
        fc.asyncProperty(answer, bodyEncoding, async (body, encoding) => {
          const runId = await start(world.openGateId, { input: {} });
          const waiting = await waitForRun(runId, (run) => run.gates?.length > 0 || TERMINAL.has(run.status));
          const answered = await send(
            "POST",
            `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`,
            bodyText(body, encoding),
            encoding,
          );
          // An accepted answer resumes the task; a refused one leaves the run waiting, so it is cancelled.
          world.startedRuns.set(runId, { mustEnd: true });
          if (answered.status !== 200) {
            await send("POST", `/v1/runs/${runId}/cancel`, "", JSON_BODY);
          }
        }),
        10,
      );
    },
  );

  it(
    "POST /v1/runs/{id}/cancel · pause · resume · redrive · approve: hostile bodies and ids",
    { timeout: TIMEOUT_MS },
    async () => {
      const run = fc.oneof(fc.constantFrom(...world.victims), pathSegment);
      const control = fc.constantFrom("cancel", "pause", "resume", "redrive", "approve");
      const body = fc.oneof(
        fc.record({ reason: hostileJson }, { noNullPrototype: true }),
        fc.record({ approved_steps: hostileJson }, { noNullPrototype: true }),
        hostileJson,
        fc.constant(""),
      );
      await check(
        fc.asyncProperty(run, control, body, bodyEncoding, async (runId, name, value, encoding) => {
          await send("POST", `/v1/runs/${runId}/${name}`, value === "" ? "" : bodyText(value, encoding), encoding);
        }),
        40,
      );
    },
  );

  it(
    "GET (and other methods) on every route with hostile ids, query strings, cursors and credentials",
    { timeout: TIMEOUT_MS },
    async () => {
      const runId = fc.oneof(fc.constantFrom(world.target.runId, world.completedRunId, ...world.victims), pathSegment);
      const path = fc.oneof(
        runId.map((id) => `/v1/runs/${id}`),
        runId.map((id) => `/v1/runs/${id}/journal`),
        runId.map((id) => `/v1/runs/${id}/gates`),
        // Events of a finished run end by themselves; others are cancelled once their status is known.
        fc.oneof(fc.constant(world.completedRunId), pathSegment).map((id) => `/v1/runs/${id}/events`),
        fc
          .tuple(
            fc.constantFrom("workflows", "tasks", "actions", "prompts", "models", "mcp-servers", "mcp_servers"),
            fc.oneof(fc.constantFrom(...world.corpusIds), pathSegment),
          )
          .map(([kind, id]) => `/v1/${kind}/${id}`),
        fc.tuple(pathSegment, pathSegment).map(([kind, id]) => `/v1/${kind}/${id}`),
        fc
          .tuple(fc.constantFrom("workflows", "actions"), fc.constantFrom(...world.corpusIds), pathSegment)
          .map(([kind, id, version]) => `/v1/${kind}/${id}/versions/${version}`),
        pathSegment.map((segment) => `/v1/${segment}`),
        pathSegment.map((segment) => `/${segment}`),
        fc.constantFrom("/healthz", "/v1/journal-keys", "/v1", "/v1/", "/", "//v1//runs", "/v1/runs", "/V1/RUNS"),
      );
      const method = fc.oneof(
        { weight: 8, arbitrary: fc.constant("GET") },
        { weight: 1, arbitrary: fc.constantFrom("HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "POST") },
      );
      const authorization = fc.oneof(
        { weight: 6, arbitrary: fc.constant(`Bearer ${TOKEN}`) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            null,
            "",
            "Bearer",
            "Bearer ",
            `bearer ${TOKEN}`,
            `Bearer  ${TOKEN} `,
            `Bearer ${TOKEN} x`,
            "Basic dGVzdDp0ZXN0",
            `Bearer ${TOKEN},second-token`,
          ),
        },
        {
          weight: 1,
          arbitrary: hostileString.filter((text) => text.length < 1_000).map((text) => `Bearer ${percentEncode(text)}`),
        },
      );
      const lastEventId = fc.option(
        fc.constantFrom("0", "1", "-1", "1.5", "1e400", "NaN", "99999999999999999999", "abc", ""),
        { nil: undefined },
      );
      await check(
        fc.asyncProperty(
          method,
          path,
          queryString,
          authorization,
          lastEventId,
          async (verb, route, query, auth, cursor) => {
            const headers: Record<string, string> = {};
            if (auth !== null) {
              headers.authorization = auth;
            }
            if (cursor !== undefined) {
              headers["last-event-id"] = cursor;
            }
            await send(verb, `${route}${query}`, undefined, null, headers);
          },
        ),
        80,
      );
    },
  );

  it("Workers RPC: hostile arguments of any type to every method", { timeout: TIMEOUT_MS }, async () => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    // Structured clone carries more than JSON: undefined, bigint, Map, Date, typed arrays, errors, functions (as stubs).
    const cloneable = fc.oneof(
      { weight: 6, arbitrary: hostileJson.map((value) => materialize(value, 2_000)) },
      {
        weight: 1,
        arbitrary: fc.constantFrom<unknown>(
          undefined,
          12n,
          new Map([["a", 1]]),
          new Set([1]),
          new Date(Number.NaN),
          new Uint8Array(4),
          new Error("e"),
          [undefined],
          { a: undefined },
          () => 1,
        ),
      },
    );
    // The target run is only ever sent gate answers it cannot accept: the health check finishes it.
    const id = fc.oneof(
      fc.constantFrom(world.victimGate.runId, world.completedRunId, world.safeId, "workflows", world.target.gateId),
      hostileString,
      cloneable,
    );
    const call = fc.oneof(
      fc.tuple(
        fc.constant("registerDefinitions"),
        fc.tuple(
          fc.oneof(
            fc
              .tuple(fc.nat(), fc.array(mutation, { maxLength: 3 }))
              .map(([which, mutations]) =>
                materialize(mutate(world.corpus[which % world.corpus.length], mutations), 2_000),
              ),
            cloneable,
          ),
        ),
      ),
      fc.tuple(fc.constant("getDefinition"), fc.tuple(id, id, cloneable)),
      fc.tuple(
        fc.constant("startRun"),
        fc.tuple(
          fc.oneof(fc.constant(world.corpusIds[0]), id),
          fc.oneof(
            fc.record({ input: cloneable, mode: fc.constantFrom("preview", "approval") }, { noNullPrototype: true }),
            cloneable.filter((value) => !isAutoStart(value)),
          ),
        ),
      ),
      fc.tuple(
        fc.constantFrom("getRun", "getJournal", "listGates", "pauseRun", "resumeRun", "redriveRun", "approveRun"),
        fc.tuple(fc.oneof(fc.constantFrom(...world.victims), id)),
      ),
      fc.tuple(fc.constant("cancelRun"), fc.tuple(fc.oneof(fc.constantFrom(...world.victims), id), cloneable)),
      fc.tuple(
        fc.constant("runEvents"),
        fc.tuple(
          fc.oneof(fc.constant(world.completedRunId), id),
          cloneable,
          fc.constantFrom(0, -1, 1.5, Number.NaN, 1e308, "5", undefined),
        ),
      ),
      fc.tuple(
        fc.constant("answerGate"),
        fc.tuple(
          fc.oneof(fc.constant(world.target.runId), id),
          fc.oneof(fc.constant(world.target.gateId), id),
          fc.oneof(fc.record({ response: cloneable }, { noNullPrototype: true }), cloneable),
        ),
      ),
      fc.tuple(fc.constant("journalKeys"), fc.constant([])),
      fc.tuple(fc.constant("listRuns"), fc.tuple(cloneable)),
      fc.tuple(
        fc.constant("sendEvents"),
        fc.tuple(fc.oneof(fc.record({ name: hostileString, data: cloneable }, { noNullPrototype: true }), cloneable)),
      ),
    );
    await check(
      fc.asyncProperty(call, async ([method, args]) => {
        // Any key other than the corpus' must not start a run that calls out: those start only in preview or approval mode.
        const invoke = Reflect.get(rpc, method) as (...values: unknown[]) => Promise<Result<unknown>>;
        const result = await Reflect.apply(invoke, rpc, args);
        if (typeof result !== "object" || result === null || typeof result.ok !== "boolean") {
          throw new Error(`${method} returned ${String(result)}`);
        }
        tally(result.ok ? `${method} ok` : `${method} ${result.error.code}`);
        if (!result.ok) {
          const { code, message, retryable } = result.error;
          if (
            !DOTTED_CODE.test(code) ||
            typeof message !== "string" ||
            typeof retryable !== "boolean" ||
            statusOf(code) >= 500
          ) {
            throw new Error(`${method} → ${code} (${statusOf(code)}): ${message.slice(0, 500)}`);
          }
        } else if (method === "startRun") {
          const value = result.value as { run_id?: unknown };
          if (typeof value.run_id === "string") {
            world.startedRuns.set(value.run_id, { mustEnd: false });
          }
        }
      }),
      80,
    );
  });

  it(
    "leaves a healthy server: /healthz answers, every run it touched reads without a 5xx, the waiting run and a new one complete",
    { timeout: TIMEOUT_MS },
    async () => {
      family = "afterwards";
      expect(await api("GET", "/healthz", undefined, null)).toEqual({ status: 200, json: { ok: true } });
      for (const runId of [...world.startedRuns.keys(), ...world.victims]) {
        for (const suffix of ["", "/journal", "/gates"]) {
          const read = await api("GET", `/v1/runs/${runId}${suffix}`);
          expect(
            read.status,
            `GET /v1/runs/${runId}${suffix}: ${JSON.stringify(read.json).slice(0, 500)}`,
          ).toBeLessThan(500);
        }
      }
      // Runs that compute by themselves end (completed or failed), none hangs: they all had a 20 s run timeout at most.
      const mustEnd = [...world.startedRuns].filter(([, run]) => run.mustEnd).map(([runId]) => runId);
      const ended = await Promise.all(
        mustEnd.map((runId) =>
          waitForRun(runId, (run) => TERMINAL.has(run.status), 30_000).then((run) => ({
            runId,
            status: run.status as string,
            error: run.error as unknown,
          })),
        ),
      );
      for (const run of ended) {
        tally(`run ${run.status}`);
      }
      expect(ended.every((run) => TERMINAL.has(run.status))).toBe(true);
      const answered = await api("POST", `/v1/runs/${world.target.runId}/gates/${world.target.gateId}`, {
        response: { token: world.target.token },
      });
      expect(answered.status, JSON.stringify(answered.json)).toBe(200);
      expect(await waitForRun(world.target.runId)).toMatchObject({
        status: "completed",
        output: { token: world.target.token },
      });

      const fresh = await api("POST", `/v1/workflows/${world.safeId}/runs`, { input: { n: 2 } });
      expect(fresh.status).toBe(201);
      const run = await waitForRun(fresh.json.run_id);
      expect(run).toMatchObject({ status: "completed", output: { echo: { n: 2 } } });
      const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
      for (const runId of [world.target.runId, fresh.json.run_id]) {
        const entries = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
        expect((await verifyJournal(entries, jwks, { requireAttestation: true })).ok).toBe(true);
      }
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      console.log(
        [...seen]
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([key, count]) => `${String(count).padStart(6)}  ${key}`)
          .join("\n"),
      );
      expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(
        [
          "__defineGetter__",
          "__defineSetter__",
          "__lookupGetter__",
          "__lookupSetter__",
          "__proto__",
          "constructor",
          "hasOwnProperty",
          "isPrototypeOf",
          "propertyIsEnumerable",
          "toLocaleString",
          "toString",
          "valueOf",
        ].sort(),
      );
    },
  );
});

/** Runs a property with the suite's seed; the slice's `sliceRuns`, or the long run's count. */
async function check(property: fc.IAsyncProperty<unknown[]>, sliceRuns: number): Promise<void> {
  family = expect.getState().currentTestName?.split(" > ").at(-1)?.slice(0, 70) ?? "";
  const started = Date.now();
  await fc.assert(property, { seed: SEED, numRuns: runs(sliceRuns), endOnFailure: !LONG });
  tally(`(${runs(sliceRuns)} cases in ${Date.now() - started} ms)`);
}

/** A request body whose start would run a corpus-free auto run: the RPC property never sends one. */
function isAutoStart(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    !["preview", "approval"].includes(String(Reflect.get(value, "mode")))
  );
}

/**
 * Sends one request and checks the answer: never a 5xx; a 4xx has the
 * documented error body with a dotted code. An event stream is checked by its
 * status and then cancelled.
 */
async function send(
  method: string,
  path: string,
  text: string | undefined,
  encoding: BodyEncoding | null,
  extraHeaders: Record<string, string> = { authorization: `Bearer ${TOKEN}` },
): Promise<{ status: number; json: any }> {
  const headers = new Headers(extraHeaders);
  if (encoding?.contentType) {
    headers.set("content-type", encoding.contentType);
  }
  const response = await exports.default.fetch(`http://trellis.test${path}`, {
    method,
    headers,
    body: method === "GET" || method === "HEAD" ? undefined : text,
  });
  const label = `${method} ${path.slice(0, 300)} ${text === undefined ? "" : JSON.stringify(text.slice(0, 300))}`;
  if (response.status >= 500) {
    throw new Error(`${label} → ${response.status} ${(await response.text()).slice(0, 1_000)}`);
  }
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    await response.body?.cancel();
    return { status: response.status, json: null };
  }
  const body = await response.text();
  tally(
    `${response.status}${response.status >= 400 && method !== "HEAD" ? ` ${(JSON.parse(body) as { error?: { code?: string } }).error?.code ?? ""}` : ""}`,
  );
  if (method === "HEAD" || response.status < 400) {
    return { status: response.status, json: response.status < 300 && body ? (JSON.parse(body) as unknown) : null };
  }
  const parsed = ErrorBody.safeParse(JSON.parse(body));
  if (
    !parsed.success ||
    !DOTTED_CODE.test(parsed.data.error.code) ||
    statusOf(parsed.data.error.code) !== response.status
  ) {
    throw new Error(
      `${label} → ${response.status} with a body that is not the documented error: ${body.slice(0, 1_000)}`,
    );
  }
  return { status: response.status, json: parsed.data };
}

/** The workflows, corpus and runs the properties aim at. */
async function setUp(): Promise<World> {
  const suffix = crypto.randomUUID().slice(0, 8);
  const safeId = `fz-safe-${suffix}`;
  const gatedId = `fz-gated-${suffix}`;
  const token = crypto.randomUUID();
  await register({
    workflows: [
      {
        id: safeId,
        nodes: {
          echo: {
            when: "input == null || type(input) != map || !has(input.skip)",
            input_mapping: { value: "$.input", n: "$.input.n", all: "$..*" },
            task: {
              steps: [
                {
                  ref: "copy",
                  action: { kind: "context", implementation: { updates: [{ path: "echo", expr: "input.value" }] } },
                  output_mapping: { "output.echo": "$.echo" },
                  on_failure: "continue",
                },
              ],
            },
            output_mapping: {
              "output.echo": "$.echo",
              "output.text": { template: "{{echo}} {{#each echo}}{{@key}}={{this}} {{/each}}" },
            },
          },
        },
      },
      {
        id: gatedId,
        nodes: {
          ask: {
            task: {
              steps: [
                {
                  ref: "ask",
                  action: {
                    kind: "human",
                    implementation: {
                      prompt_template: "{{input}}",
                      input_schema: { type: "object", required: ["token"], properties: { token: { const: token } } },
                    },
                  },
                  output_mapping: { "output.token": "$.response.token" },
                },
              ],
            },
            output_mapping: { "output.token": "$.token" },
          },
        },
      },
    ],
  });
  const corpus = definitionCorpus(suffix, (env as unknown as { HTTP_TARGET_URL: string }).HTTP_TARGET_URL);
  for (const bundle of corpus) {
    await register(bundle);
  }
  const compute = computeCorpus(suffix);
  for (const bundle of compute) {
    await register(bundle);
  }
  const corpusIds = corpus.flatMap((bundle) =>
    ((bundle.workflows as { id: string }[] | undefined) ?? []).map((workflow) => workflow.id),
  );

  const openGateId = `fz-open-gate-${suffix}`;
  await registerWorkflow({
    id: openGateId,
    timeout_ms: 20_000,
    nodes: {
      ask: {
        task: {
          steps: [
            {
              ref: "ask",
              action: { kind: "human", implementation: { prompt_template: "anything", input_schema: {} } },
              output_mapping: { "state.answer": "$.response", "output.by": "$.responder" },
            },
            {
              ref: "use",
              action: {
                kind: "context",
                implementation: {
                  updates: [{ path: "kind", expr: "type(input.answer) == string ? 'text' : 'other'" }],
                },
              },
              input_mapping: { answer: "$.state.answer" },
              output_mapping: { "output.kind": "$.kind", "output.answer": { template: "{{answer}}" } },
              on_failure: "continue",
            },
          ],
        },
        output_mapping: { "output.answer": "$.answer", "output.kind": "$.kind" },
      },
    },
  });
  const targetRun = await start(gatedId, { input: {} });
  const victimGated = await start(gatedId, { input: { victim: true } });
  const drafting = await start(safeId, { input: { n: 1 }, mode: "approval" });
  const completed = await start(safeId, { input: { n: 1 } });
  const [targetView, victimView] = await Promise.all([
    waitForRun(targetRun, (run) => run.gates?.length > 0),
    waitForRun(victimGated, (run) => run.gates?.length > 0),
  ]);
  await waitForRun(completed, (run) => TERMINAL.has(run.status));
  return {
    safeId,
    gatedId,
    openGateId,
    corpusIds,
    corpus,
    computeCorpus: compute,
    target: { runId: targetRun, gateId: targetView.gates[0].gate_id, token },
    victims: [drafting, completed, victimGated, `run_${"0".repeat(32)}`],
    victimGate: { runId: victimGated, gateId: victimView.gates[0].gate_id },
    completedRunId: completed,
    startedRuns: new Map(),
  };
}
