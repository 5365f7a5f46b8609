import type { Target } from "./config.ts";

/** An error the API answered (its `code` and `message`), or one the CLI met on the way. */
export class CliError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly details: readonly { path: string; message: string }[];

  constructor(
    code: string,
    message: string,
    status?: number,
    details: readonly { path: string; message: string }[] = [],
  ) {
    super(message);
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as is with this content type (a YAML bundle), instead of `body` as JSON. */
  raw?: { text: string; contentType: string };
  headers?: Record<string, string>;
}

/** The Trellis HTTP API (docs/api.md), as the CLI calls it. */
export class Api {
  readonly target: Target;

  constructor(target: Target) {
    this.target = target;
  }

  async json<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.send(method, path, options);
    const text = await response.text();
    const parsed = text === "" ? null : parseJson(text, path);
    if (!response.ok) {
      throw toCliError(response.status, parsed);
    }
    return parsed as T;
  }

  /** The raw response of a request that succeeded (an event stream). */
  async stream(path: string, headers: Record<string, string> = {}): Promise<Response> {
    const response = await this.send("GET", path, { headers });
    if (!response.ok) {
      throw toCliError(response.status, parseJson(await response.text(), path));
    }
    return response;
  }

  private async send(method: string, path: string, options: RequestOptions): Promise<Response> {
    const headers: Record<string, string> = { ...options.headers };
    if (this.target.token !== undefined) {
      headers.authorization = `Bearer ${this.target.token}`;
    }
    let body: string | undefined;
    if (options.raw) {
      headers["content-type"] = options.raw.contentType;
      body = options.raw.text;
    } else if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    try {
      return await fetch(`${this.target.url}${path}`, { method, headers, body });
    } catch (thrown) {
      const cause = thrown instanceof Error && thrown.cause instanceof Error ? `: ${thrown.cause.message}` : "";
      throw new CliError(
        "cli.unreachable",
        `cannot reach Trellis at ${this.target.url}${cause} (is \`npm run dev\` running? set TRELLIS_URL or --url)`,
      );
    }
  }
}

function parseJson(text: string, path: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError("cli.bad_response", `${path} answered something that is not JSON: ${text.slice(0, 200)}`);
  }
}

function toCliError(status: number, body: unknown): CliError {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined;
  if (typeof error === "object" && error !== null && "code" in error && typeof error.code === "string") {
    const message = "message" in error && typeof error.message === "string" ? error.message : error.code;
    const details = "details" in error && Array.isArray(error.details) ? error.details : [];
    return new CliError(error.code, message, status, details);
  }
  return new CliError("cli.bad_response", `the API answered ${status}`, status);
}
