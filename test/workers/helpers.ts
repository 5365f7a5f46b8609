import { env, exports } from "cloudflare:workers";

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
