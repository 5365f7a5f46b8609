import { env, exports } from "cloudflare:workers";
import { vi } from "vitest";
import { verifyJournal, type VerifyReport } from "../../lib/journal/index.ts";
import {
  ErrorBody,
  GateView,
  RunList,
  StepRecord,
  toTaskGroup,
  ToolResult,
  type RunSummary,
  type TaskPayload,
} from "../../schemas/index.ts";

export const TOKEN = "test-token";

/** Calls the Worker's HTTP API as a client would. */
export async function api(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = TOKEN,
): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = {};
  if (token !== null) {
    headers.authorization = `Bearer ${token}`;
  }
  if (body !== undefined) {
    headers["content-type"] = "application/json";
  }
  const response = await exports.default.fetch(`http://trellis.test${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

/** A definition id unique to this test, so tests never share catalog state. */
/** Sends the executor one task, as the coordinator sends a group of one, and answers its result. */
export async function runOne(payload: unknown): Promise<unknown> {
  const [result] = await env.EXECUTOR.runTaskList(toTaskGroup([payload as TaskPayload]));
  return result;
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** Polls `GET /v1/runs/{id}` until the run is terminal (or `until` holds). */
export async function waitForRun(
  runId: string,
  until: (run: any) => boolean = (run) => TERMINAL.has(run.status),
  timeoutMs = 20_000,
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { json } = await api("GET", `/v1/runs/${runId}`);
    if (until(json)) {
      return json;
    }
    if (Date.now() > deadline) {
      throw new Error(`run ${runId} did not settle: ${JSON.stringify(json)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export const httpTarget = (): string => (env as unknown as { HTTP_TARGET_URL: string }).HTTP_TARGET_URL;

/** A one-node workflow whose node runs an inline task of the given steps. */
export function singleTaskWorkflow(id: string, steps: unknown[], extra: Record<string, unknown> = {}) {
  return { id, nodes: { main: { task: { steps }, output_mapping: { "output.result": "$" } } }, ...extra };
}

export const llmServer = (): string => (env as unknown as { LLM_SERVER_URL: string }).LLM_SERVER_URL;
/** Scripts the local LLM server's answers for requests carrying `[[script:<key>]]` (scripts/lib/llm-scripts.mjs). */
export async function postLlmScript(key: string, turns: unknown[]): Promise<void> {
  const response = await fetch(`${llmServer()}/scripts/${key}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ turns }),
  });
  if (response.status !== 200) {
    throw new Error(await response.text());
  }
}

export const mcpServer = (): string => (env as unknown as { MCP_SERVER_URL: string }).MCP_SERVER_URL;

/** How many requests the HTTP target has counted under `key`. */
export async function hits(key: string): Promise<number> {
  return ((await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number }).count;
}

/** Waits (10 s at most) until the HTTP target has counted `count` requests under `key`. */
export function untilHits(key: string, count: number, options: { interval?: number } = {}): Promise<boolean> {
  return vi.waitUntil(async () => (await hits(key)) >= count, { timeout: 10_000, ...options });
}

/** A journal entry as `GET /v1/runs/{id}/journal` returns it. */
export interface Entry {
  seq: number;
  kind: string;
  at: string;
  hash: string;
  body: Record<string, any>;
}

/** The step records an entry carries (`task.completed`, `task.failed`, `task.suspended`), checked against their schema. */
export function stepsOf(entry: Entry | undefined): StepRecord[] {
  return StepRecord.array().parse(entry?.body.steps);
}

/** What one step's `attempt`-th call (1-based) did, as its attempt record says. */
export function callOf(entry: Entry | undefined, step = 0, attempt = 1): Record<string, unknown> | undefined {
  return stepsOf(entry)[step]?.attempts[attempt - 1]?.call;
}

/** A run waiting at an open gate, or settled: what tests wait for before answering a gate. */
export function gateOpenOrSettled(run: { status: string; gates?: { status: string }[] }): boolean {
  return run.gates?.some((gate) => gate.status === "open") === true || TERMINAL.has(run.status);
}

/** Registers a definition bundle; any answer but 201 fails the test's setup. */
export async function register(bundle: unknown): Promise<void> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
}

/** Starts a run of a registered workflow and returns its id; any answer but 201 fails the setup. */
export async function start(workflowId: string, body: Record<string, unknown> = { input: {} }): Promise<string> {
  const response = await api("POST", `/v1/workflows/${workflowId}/runs`, body);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return String(response.json.run_id);
}

/** Registers a bundle of `workflow` alone. */
export function registerWorkflow(workflow: Record<string, unknown>): Promise<void> {
  return register({ workflows: [workflow] });
}

/** Registers `workflow` on its own and starts a run of it; returns the run id. */
export async function startWorkflow(
  workflow: Record<string, unknown>,
  body: Record<string, unknown> = { input: {} },
): Promise<string> {
  await registerWorkflow(workflow);
  return start(String(workflow.id), body);
}

/** Registers `workflow` (with the rest of `bundle`), runs it on `input` and waits until the run is terminal. */
export async function runWorkflow(
  workflow: Record<string, unknown>,
  input: unknown = {},
  bundle: Record<string, unknown> = {},
  timeoutMs?: number,
): Promise<any> {
  await register({ ...bundle, workflows: [workflow] });
  return waitForRun(await start(String(workflow.id), { input }), undefined, timeoutMs);
}

/** The run's journal, every entry. */
export async function journal(runId: string): Promise<Entry[]> {
  return (await api("GET", `/v1/runs/${runId}/journal`)).json.entries as Entry[];
}

/** Verifies the run's journal against the published keys, attestation required. */
export async function verifyRun(runId: string): Promise<VerifyReport> {
  const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
  return verifyJournal(await journal(runId), jwks, { requireAttestation: true });
}

/** Whether the run's journal verifies, attestation required. */
export async function verified(runId: string): Promise<boolean> {
  return (await verifyRun(runId)).ok;
}

/** An HTTP step that GETs `url`. */
export const httpStep = (ref: string, url: string, extra: Record<string, unknown> = {}) => ({
  ref,
  action: { kind: "http", implementation: { method: "GET", url_template: url } },
  ...extra,
});

/** What `fn` throws, or undefined when it returns. */
export function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** A workflow of one node `node` whose task is the one step `step`. */
export const oneStepWorkflow = (id: string, node: string, step: unknown) => ({
  id,
  nodes: { [node]: { task: { steps: [step] } } },
});

/** A high-risk POST to the HTTP target's `/mark/{key}`: it waits for an approval before it runs. */
export const riskyStep = (key: string) => ({
  ref: "deploy",
  action: {
    kind: "http",
    risk: "high",
    implementation: { method: "POST", url_template: `${httpTarget()}/mark/${key}` },
  },
  output_mapping: { "output.status": "$.status" },
});

/** A plan run's `results` (docs/plans.md), checked against their schema. */
export function resultsOf(run: { results?: unknown }): ToolResult[] {
  return ToolResult.array().parse(run.results);
}

/** A run view's gates, checked against their schema. */
export function gatesOf(run: { gates?: unknown }): GateView[] {
  return GateView.array().parse(run.gates);
}

/** The `details` of an error answer, checked against the error body's schema. */
export function detailsOf(json: unknown): { path: string; message: string }[] {
  return ErrorBody.parse(json).error.details ?? [];
}

/** The runs of a `GET /v1/runs` answer, checked against its schema. */
export function listedRuns(json: unknown): RunSummary[] {
  return RunList.parse(json).runs;
}
