import type { CreatedToken, TokenList, TokenView } from "../schemas/index.ts";
import { CliError } from "./api.ts";
import type { Exit, Io } from "./commands.ts";

/** `trellis tokens create|list|revoke`: tokens as data (docs/api.md, "Tokens"; admin only). */
export const TOKEN_ACTIONS = ["create", "list", "revoke"] as const;
export type TokenAction = (typeof TOKEN_ACTIONS)[number];

export interface TokenOptions {
  /** Comma-separated roles: reader, runner, approver, author, admin. */
  roles?: string;
  /** Comma-separated workflow id patterns (`billing-*`): the workflows the token is limited to. */
  workflows?: string;
  /** ISO 8601: when the token expires. */
  expires?: string;
}

const commaList = (text: string): string[] =>
  text
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0);

/**
 * `trellis tokens create <name> --roles … [--workflows …] [--expires …]` prints the secret (once: the
 * server keeps only its hash), `trellis tokens list` one token a line, `trellis tokens revoke <token_id>`.
 */
export async function tokensCommand(
  io: Io,
  action: TokenAction,
  argument: string | undefined,
  options: TokenOptions,
): Promise<Exit> {
  if (action === "list") {
    const list = await io.api.json<TokenList>("GET", "/v1/tokens");
    write(io, list, () => (list.tokens.length === 0 ? "no tokens" : list.tokens.map(tokenLine).join("\n")));
    return 0;
  }
  if (argument === undefined) {
    const what = action === "create" ? "a name" : "a token id (tok_…)";
    throw new CliError("cli.missing_argument", `tokens ${action} needs ${what}`);
  }
  if (action === "revoke") {
    const revoked = await io.api.json<{ token_id: string }>("DELETE", `/v1/tokens/${encodeURIComponent(argument)}`);
    write(io, revoked, () => `revoked ${revoked.token_id}`);
    return 0;
  }
  const made = await io.api.json<CreatedToken>("POST", "/v1/tokens", { body: createBody(argument, options) });
  write(io, made, () => `${tokenLine(made)}\n${made.token}\n(the secret is shown this once; keep it now)`);
  return 0;
}

function createBody(name: string, options: TokenOptions): Record<string, unknown> {
  if (options.roles === undefined) {
    throw new CliError("cli.missing_roles", "tokens create needs --roles (e.g. --roles reader,runner)");
  }
  return {
    name,
    roles: commaList(options.roles),
    ...(options.workflows === undefined ? {} : { workflows: commaList(options.workflows) }),
    ...(options.expires === undefined ? {} : { expires_at: options.expires }),
  };
}

/** One token in one line: `tok_…  ci  runner  workflows billing-*  expires 2026-06-01T00:00:00.000Z`. */
export function tokenLine(token: Pick<TokenView, "token_id" | "name" | "roles" | "workflows" | "expires_at">): string {
  const workflows = token.workflows === null ? "every workflow" : `workflows ${token.workflows.join(",")}`;
  const expires = token.expires_at === null ? "never expires" : `expires ${token.expires_at}`;
  return `${token.token_id}  ${token.name}  ${token.roles.join(",")}  ${workflows}  ${expires}`;
}

function write(io: Io, value: unknown, text: () => string): void {
  io.out.write(`${io.json ? JSON.stringify(value, null, 2) : text()}\n`);
}
