/**
 * The console's client of the HTTP API (docs/api.md): the bearer token kept
 * for this browser session only (sessionStorage, never a URL or a cookie), and
 * every response parsed with a zod schema before a page sees it.
 */
import type { z } from "zod";
import { ErrorBody } from "../../schemas/api.ts";

const TOKEN_KEY = "trellis.api_token";
/** Set once this browser signed in through Cloudflare Access: later visits sign in that way without asking. */
const ACCESS_HINT_KEY = "trellis.signed_in_through_access";
/** Fired on `window` when the API refuses the token: the app shows the sign-in form again. */
export const SIGNED_OUT_EVENT = "trellis:signed-out";

export function readToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function saveToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token);
}

/** Whether this browser signed in through Access before (a hint kept in localStorage, never a credential). */
export function readAccessHint(): boolean {
  return localStorage.getItem(ACCESS_HINT_KEY) === "1";
}

export function saveAccessHint(signedIn: boolean): void {
  if (signedIn) {
    localStorage.setItem(ACCESS_HINT_KEY, "1");
  } else {
    localStorage.removeItem(ACCESS_HINT_KEY);
  }
}

/** Signing out: the token is forgotten. */
export function clearToken(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The API refused the token: forget it and tell the app. */
function forgetToken(): void {
  clearToken();
  window.dispatchEvent(new Event(SIGNED_OUT_EVENT));
}

/** An API error as the body says it (`code`, `message`, `details` with dotted paths), or a client-side one. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: readonly { path: string; message: string }[];

  constructor(
    status: number,
    code: string,
    message: string,
    details: readonly { path: string; message: string }[] = [],
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

async function toApiError(res: Response): Promise<ApiError> {
  const body: unknown = await res.json().catch(() => null);
  const parsed = ErrorBody.safeParse(body);
  if (!parsed.success) {
    return new ApiError(res.status, "http.status", `the server answered ${res.status}`);
  }
  const { code, message, details } = parsed.data.error;
  return new ApiError(res.status, code, message, details ?? []);
}

/** `fetch` with the session's bearer token; a non-2xx answer throws its {@link ApiError} (a 401 also signs out). */
export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = readToken();
  if (token !== null) {
    headers.set("authorization", `Bearer ${token}`);
  }
  const res = await fetch(path, { ...init, headers });
  if (!res.ok) {
    const error = await toApiError(res);
    if (res.status === 401) {
      forgetToken();
    }
    throw error;
  }
  return res;
}

/** GETs (or sends `init`) and parses the JSON answer with `schema`. */
export async function apiJson<T>(schema: z.ZodType<T>, path: string, init?: RequestInit): Promise<T> {
  const res = await apiFetch(path, init);
  const body: unknown = await res.json();
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined ? "" : ` at ${issue.path.join(".") || "the root"}: ${issue.message}`;
    throw new ApiError(res.status, "console.unexpected_response", `${path} answered an unexpected body${where}`);
  }
  return parsed.data;
}

/** POSTs `body` as JSON and parses the answer with `schema`. */
export function postJson<T>(schema: z.ZodType<T>, path: string, body: unknown): Promise<T> {
  return apiJson(schema, path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** A path segment, percent-encoded. */
export function encodeSegment(value: string): string {
  return encodeURIComponent(value);
}

/** `error` as one line for the page, with the paths of its details. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) {
    const details = error.details.map((d) => `${d.path || "body"}: ${d.message}`).join("; ");
    return `${error.code}: ${error.message}${details === "" ? "" : ` (${details})`}`;
  }
  return error instanceof Error ? error.message : String(error);
}
