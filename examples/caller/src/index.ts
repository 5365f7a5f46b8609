/**
 * An example caller of Trellis over Workers RPC: `POST /runs/<workflow>` with
 * the run's input as the body starts a run, and `GET /runs/<run_id>` shows
 * one. Trellis's errors arrive as data (`{ ok: false, error }`) and are
 * answered with an HTTP status that follows their code.
 */
import type { ErrorData, Json, Result, TrellisApi } from "trellis/client";

/**
 * The caller's bindings. `TRELLIS` has the client's plain interface
 * (`trellis/client`), not the type `wrangler types` derives over both
 * configs (`Service<typeof import(".../src/index").TrellisApi>`), which pulls
 * Trellis's whole source into this program and is too deep for tsc (TS2589).
 */
export interface CallerEnv {
  TRELLIS: TrellisApi;
}

export default {
  async fetch(request: Request, env: CallerEnv): Promise<Response> {
    const [, resource, name] = new URL(request.url).pathname.split("/");
    if (resource !== "runs" || !name) {
      return Response.json(
        { error: { code: "route.not_found", message: "POST /runs/<workflow> or GET /runs/<run_id>" } },
        { status: 404 },
      );
    }
    if (request.method === "POST") {
      const input = (await request.json()) as Json;
      const key = request.headers.get("idempotency-key") ?? undefined;
      return answer(await env.TRELLIS.startRun(name, { input, idempotency_key: key }), 201);
    }
    return answer(await env.TRELLIS.getRun(name), 200);
  },
} satisfies ExportedHandler<CallerEnv>;

function answer<T>(result: Result<T>, status: number): Response {
  return result.ok
    ? Response.json(result.value, { status })
    : Response.json({ error: result.error }, { status: statusOf(result.error) });
}

function statusOf(error: ErrorData): number {
  if (error.code.endsWith(".not_found")) {
    return 404;
  }
  return error.code.endsWith(".invalid") || error.code.startsWith("request.") ? 400 : 500;
}
