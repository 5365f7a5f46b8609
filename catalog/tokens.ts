import { EngineError } from "../lib/errors.ts";
import { TokenRecord, type TokenView } from "../schemas/auth.ts";

/**
 * The API tokens made by `POST /v1/tokens`, in the catalog's SQLite: each
 * with its roles, its grant of workflows, its expiry and the keyed hash of
 * its secret (src/auth.ts computes the hash; the secret never reaches this
 * object). Roles and grants are JSON arrays in their columns.
 */
export class TokenTable {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(`CREATE TABLE IF NOT EXISTS tokens (
      token_id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
      roles TEXT NOT NULL, workflows TEXT, expires_at TEXT,
      created_at TEXT NOT NULL, created_by TEXT NOT NULL)`);
  }

  /** Stores a new token (its id and hash are fresh: a clash is a bug, not a conflict to report). */
  insert(record: TokenRecord): void {
    const token = TokenRecord.parse(record);
    this.sql.exec(
      `INSERT INTO tokens (token_id, hash, name, roles, workflows, expires_at, created_at, created_by)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      token.token_id,
      token.hash,
      token.name,
      JSON.stringify(token.roles),
      token.workflows === null ? null : JSON.stringify(token.workflows),
      token.expires_at,
      token.created_at,
      token.created_by,
    );
  }

  /** Every stored token, newest first, without its hash. */
  list(): TokenView[] {
    return this.sql
      .exec("SELECT * FROM tokens ORDER BY created_at DESC, token_id DESC")
      .toArray()
      .map((row) => {
        const { hash: _hash, ...view } = toRecord(row);
        return view;
      });
  }

  /** The token whose secret has this keyed hash, or null. */
  byHash(hash: string): TokenRecord | null {
    const row = this.sql.exec("SELECT * FROM tokens WHERE hash = ?", hash).toArray()[0];
    return row === undefined ? null : toRecord(row);
  }

  /** Deletes a token: `token.not_found` when there is none by that id. */
  delete(tokenId: string): void {
    const cursor = this.sql.exec("DELETE FROM tokens WHERE token_id = ?", tokenId);
    if (cursor.rowsWritten === 0) {
      throw EngineError.terminal("token.not_found", `no token "${tokenId}"`);
    }
  }
}

function toRecord(row: Record<string, SqlStorageValue>): TokenRecord {
  return TokenRecord.parse({
    ...row,
    roles: JSON.parse(String(row.roles)) as unknown,
    workflows: row.workflows === null ? null : (JSON.parse(String(row.workflows)) as unknown),
  });
}
