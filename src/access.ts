import { EngineError } from "../lib/errors.ts";
import type { Principal } from "../schemas/auth.ts";
import { API_ROUTES, type Grant, type RouteRole } from "./contracts/routes.ts";
import { getRun } from "./service.ts";

/**
 * Who may do what (docs/security.md, "Roles"): the route table
 * (src/contracts/routes.ts) names the role and the grant of each route, by
 * its operation id, which is also the Workers RPC method's name; these are
 * the checks both the HTTP routes and the RPC methods make from it.
 */

/** What an operation needs: a role, and how a token limited to workflows reaches it. */
export interface Access {
  operationId: string;
  role: RouteRole;
  grant: Grant;
}

/** Each operation of a bearer route, by its operation id. */
const ACCESS: ReadonlyMap<string, Access> = new Map(
  API_ROUTES.flatMap((route) =>
    route.auth === "bearer"
      ? [[route.operationId, { operationId: route.operationId, role: route.role, grant: route.grant }] as const]
      : [],
  ),
);

/** What an operation needs (a bug when the route table has no bearer route of that id). */
export function accessOf(operationId: string): Access {
  const access = ACCESS.get(operationId);
  if (access === undefined) {
    throw new EngineError("internal.error", `no route of the route table is operation "${operationId}"`);
  }
  return access;
}

/** Whether the principal holds the role (admin holds every role; every principal holds `any`). */
export function hasRole(principal: Principal, role: RouteRole): boolean {
  return role === "any" || principal.roles.includes("admin") || principal.roles.includes(role);
}

/**
 * The checks made before an operation runs: the role (403 `auth.forbidden`
 * naming it), and a grant of every workflow for an operation that acts
 * across workflows. What a route scoped to a run or a workflow checks
 * needs its parameter: {@link assertRunVisible}, {@link assertWorkflowVisible}.
 */
export function authorize(principal: Principal, access: Access): void {
  if (principal.roles.length === 0 && access.role !== "any") {
    throw EngineError.terminal(
      "auth.forbidden",
      `${nameOf(principal)} has no role${principal.kind === "access" ? ": ACCESS_ROLES grants it none" : ""}`,
      [{ path: "roles", message: `needs the role ${access.role}`, code: "auth.forbidden" }],
    );
  }
  if (!hasRole(principal, access.role)) {
    throw EngineError.terminal(
      "auth.forbidden",
      `${nameOf(principal)} lacks the role "${access.role}" that ${access.operationId} needs (it has ${principal.roles.join(", ")})`,
      [{ path: "roles", message: `needs the role ${access.role}`, code: "auth.forbidden" }],
    );
  }
  if (access.grant === "every" && principal.workflows !== null) {
    throw EngineError.terminal(
      "auth.forbidden",
      `${nameOf(principal)} is limited to the workflows ${principal.workflows.join(", ")}; ${access.operationId} needs a grant of every workflow`,
      [{ path: "workflows", message: "needs a grant of every workflow", code: "auth.forbidden" }],
    );
  }
}

/** Whether the principal may see a workflow's runs and definition: its grant matches the id (null: every workflow). */
export function inGrant(principal: Principal, workflowId: string): boolean {
  return principal.workflows === null || principal.workflows.some((pattern) => globMatches(pattern, workflowId));
}

/** A workflow the principal may not see is one that does not exist: `code` (e.g. `workflow.not_found`), 404. */
export function assertWorkflowVisible(principal: Principal, workflowId: string, code: string): void {
  if (!inGrant(principal, workflowId)) {
    throw EngineError.terminal(code, `"${workflowId}" is not registered under workflows`);
  }
}

/**
 * A run of a workflow outside the principal's grant is 404 `run.not_found`,
 * as if it did not exist. One read of the run for a token limited to
 * workflows; none for any other.
 */
export async function assertRunVisible(env: Env, principal: Principal, runId: string): Promise<void> {
  if (principal.workflows === null) {
    return;
  }
  const workflowId = await workflowOfRun(env, runId);
  if (!inGrant(principal, workflowId)) {
    throw EngineError.terminal("run.not_found", `no run "${runId}"`);
  }
}

/**
 * The workflow of a run; of a deleted run, as the run index keeps it (its
 * object answers only 410), so that a token outside its grant still meets 404.
 */
async function workflowOfRun(env: Env, runId: string): Promise<string> {
  try {
    return (await getRun(env, runId)).workflow.id;
  } catch (error) {
    if (!(error instanceof EngineError && error.code === "run.deleted")) {
      throw error;
    }
    const row = await env.RUN_INDEX.prepare("SELECT workflow_id FROM runs WHERE run_id = ?")
      .bind(runId)
      .first<{ workflow_id: string }>();
    if (row === null) {
      throw EngineError.terminal("run.not_found", `no run "${runId}"`);
    }
    return row.workflow_id;
  }
}

/** `*` matches any run of characters; every other character itself (patterns are checked by `WorkflowPattern`). */
export function globMatches(pattern: string, id: string): boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) {
    return pattern === id;
  }
  const first = parts[0] ?? "";
  const last = parts.at(-1) ?? "";
  if (!id.startsWith(first) || !id.endsWith(last) || id.length < first.length + last.length) {
    return false;
  }
  let at = first.length;
  for (const middle of parts.slice(1, -1)) {
    const found = id.indexOf(middle, at);
    if (found === -1 || found + middle.length > id.length - last.length) {
      return false;
    }
    at = found + middle.length;
  }
  return true;
}

function nameOf(principal: Principal): string {
  return principal.kind === "token" ? `the token "${principal.name}"` : `${principal.email}`;
}
