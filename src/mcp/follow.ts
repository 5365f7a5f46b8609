import type { JSONRPCRequest } from "@modelcontextprotocol/sdk/types.js";
import { isTerminal } from "../../coordinator/lifecycle.ts";
import type { RunView } from "../../schemas/api.ts";
import type { Principal } from "../../schemas/auth.ts";
import { settleRun } from "../service.ts";
import { toElicitation } from "./elicitation.ts";

/**
 * How long a run tool waits for its run (docs/mcp.md, "Waiting"): a workflow
 * tool and `trellis_wait_run` by default. Under the 60 s many MCP clients
 * give a request, with room for the answer.
 */
export const DEFAULT_WAIT_MS = 25_000;
/**
 * How long a call that asked a gate through elicitation waits in all, from
 * its start, when the client set no bound of its own: a person fills the form
 * meanwhile. Past it the call answers that the run needs input; the form,
 * submitted later, still answers the gate.
 */
export const ELICITATION_WAIT_MS = 50_000;

/** How long a call waits: until the run ends or needs input, and in all once it asked a gate. */
export interface WaitBounds {
  waitMs: number;
  askedWaitMs: number;
}

/** The bounds of a call whose client asked for `givenMs` (undefined: it set none, so the defaults). */
export function waitBounds(givenMs: number | undefined): WaitBounds {
  return givenMs === undefined
    ? { waitMs: DEFAULT_WAIT_MS, askedWaitMs: ELICITATION_WAIT_MS }
    : { waitMs: givenMs, askedWaitMs: givenMs };
}

/** What following a run needs: who asks, whether its client takes forms, and how to send one. */
export interface FollowContext {
  env: Env;
  principal: Principal;
  /** Whether the client declared form elicitation. */
  elicitation: boolean;
  /** Sends a request to the client on the tool call's own response stream. */
  ask: (request: JSONRPCRequest) => Promise<void>;
  now?: () => number;
}

/**
 * Waits up to `bounds.waitMs` for the run to end or to need input. When
 * every open gate can be asked of the client through elicitation, each is
 * asked, once per call, and the wait goes on (up to `bounds.askedWaitMs` in
 * all) for the run to end or need something else; a gate it cannot be asked
 * ends the wait at once. Answers the run as it then is, and the gates asked.
 */
export async function followRun(
  context: FollowContext,
  runId: string,
  bounds: WaitBounds,
): Promise<{ view: RunView; asked: string[] }> {
  const now = context.now ?? Date.now;
  const started = now();
  let deadline = started + bounds.waitMs;
  const asked: string[] = [];
  for (;;) {
    const view = await settleRun(context.env, runId, Math.max(0, deadline - now()), asked);
    const fresh = view.gates.filter((gate) => gate.status === "open" && !asked.includes(gate.gate_id));
    const mayAsk = context.elicitation && bounds.waitMs > 0 && now() < started + bounds.askedWaitMs;
    if (isTerminal(view.status) || fresh.length === 0 || !mayAsk) {
      return { view, asked };
    }
    const requests = fresh.flatMap((gate) => toElicitation(runId, gate, context.principal) ?? []);
    if (requests.length < fresh.length) {
      // A gate the form cannot ask (or this caller may not answer) needs the report now.
      return { view, asked };
    }
    for (const request of requests) {
      await context.ask(request);
    }
    asked.push(...fresh.map((gate) => gate.gate_id));
    deadline = Math.max(deadline, started + bounds.askedWaitMs);
  }
}
