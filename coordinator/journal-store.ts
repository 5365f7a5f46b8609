import type { SignedEntryText } from "../lib/journal/index.ts";
import type { JournalEntry } from "../schemas/journal.ts";

/**
 * Where a run's signed journal entries are stored: the SQL of the journal,
 * in one of two layouts. Every reader gets the same entries from either.
 *
 * - Pages (`journal_pages`, every run created since): a commit's entries go
 *   in one row, a JSON array of their signed texts, keyed by the last seq
 *   it holds. A chain node's four entries (`node.completed`,
 *   `task.completed`, `node.started`, `task.dispatched`) are one row written,
 *   not four (docs/performance.md, "What a step costs").
 * - Rows (`journal`, one row an entry): how runs created before were stored.
 *   Such a run keeps its layout to its end.
 */
export interface JournalTable {
  /** Appends signed entries, in seq order, each stored as the text it was signed into. */
  append(entries: readonly Pick<SignedEntryText, "seq" | "text">[]): void;
  /** Entries after `afterSeq`, at most `limit`, in seq order. */
  read(afterSeq: number, limit: number): JournalEntry[];
  /** The last entry, or undefined when there is none. */
  last(): JournalEntry | undefined;
  lastSeq(): number;
  /** The last `attest` entry. */
  lastAttestation(): JournalEntry | undefined;
  /** The entries that hold sealed values (they have `$salt`), each as JSON text, in seq order. */
  sealed(): { seq: number; entry: string }[];
  /** Replaces entries in place (an erasure's, each without its sealed values). */
  rewrite(rows: readonly { seq: number; entry: string }[]): void;
}

/** Entries a page holds, at most about this many characters of them (≤ 1.5 MB of UTF-8); a larger entry has a page of its own. */
const PAGE_CHARS = 500_000;

/** `entries` in pages of at most PAGE_CHARS characters of their texts, in order (a longer one alone). */
export function pagesOf<T extends { text: string }>(entries: readonly T[]): T[][] {
  const pages: T[][] = [];
  let chars = Infinity;
  for (const entry of entries) {
    const page = pages.at(-1);
    if (page === undefined || chars + entry.text.length > PAGE_CHARS) {
      pages.push([entry]);
      chars = entry.text.length + 1;
    } else {
      page.push(entry);
      chars += entry.text.length + 1;
    }
  }
  return pages;
}

export const JOURNAL_PAGES_TABLE =
  "CREATE TABLE IF NOT EXISTS journal_pages (last_seq INTEGER PRIMARY KEY, entries TEXT NOT NULL);";

/** The journal of a run whose object has `journal` (one row an entry) or, else, `journal_pages`. */
export function journalTable(sql: SqlStorage): JournalTable {
  const legacy = sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'journal'").toArray().length > 0;
  return legacy ? new JournalRows(sql) : new JournalPages(sql);
}

/** One row a commit's entries (at most PAGE_CHARS of them): the layout of every run created since it exists. */
export class JournalPages implements JournalTable {
  constructor(private readonly sql: SqlStorage) {}

  append(entries: readonly Pick<SignedEntryText, "seq" | "text">[]): void {
    for (const page of pagesOf(entries)) {
      this.write(page);
    }
  }

  private write(page: readonly Pick<SignedEntryText, "seq" | "text">[]): void {
    const text = `[${page.map((entry) => entry.text).join(",")}]`;
    this.sql.exec("INSERT INTO journal_pages (last_seq, entries) VALUES (?, ?)", page.at(-1)?.seq ?? 0, text);
  }

  read(afterSeq: number, limit: number): JournalEntry[] {
    const entries: JournalEntry[] = [];
    // Each page holds at least one entry: `limit` pages hold enough.
    const pages = this.sql.exec<{ entries: string }>(
      "SELECT entries FROM journal_pages WHERE last_seq > ? ORDER BY last_seq LIMIT ?",
      afterSeq,
      limit,
    );
    for (const page of pages) {
      for (const entry of JSON.parse(page.entries) as JournalEntry[]) {
        if (entry.seq > afterSeq && entries.length < limit) {
          entries.push(entry);
        }
      }
      if (entries.length >= limit) {
        break;
      }
    }
    return entries;
  }

  last(): JournalEntry | undefined {
    const page = this.sql
      .exec<{ entries: string }>("SELECT entries FROM journal_pages ORDER BY last_seq DESC LIMIT 1")
      .toArray()[0];
    return page === undefined ? undefined : (JSON.parse(page.entries) as JournalEntry[]).at(-1);
  }

  lastSeq(): number {
    return this.sql.exec<{ seq: number | null }>("SELECT MAX(last_seq) AS seq FROM journal_pages").one().seq ?? 0;
  }

  lastAttestation(): JournalEntry | undefined {
    const row = this.sql
      .exec<{ entry: string }>(
        `SELECT value AS entry FROM journal_pages, json_each(journal_pages.entries)
         WHERE value ->> '$.kind' = 'attest' ORDER BY last_seq DESC, key DESC LIMIT 1`,
      )
      .toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.entry) as JournalEntry);
  }

  sealed(): { seq: number; entry: string }[] {
    return this.sql
      .exec<{ seq: number; entry: string }>(
        `SELECT value ->> '$.seq' AS seq, value AS entry FROM journal_pages, json_each(journal_pages.entries)
         WHERE json_extract(value, '$.body."$salt"') IS NOT NULL ORDER BY last_seq, key`,
      )
      .toArray();
  }

  /** Rewrites each page that holds one of `rows`, once. */
  rewrite(rows: readonly { seq: number; entry: string }[]): void {
    const bySeq = new Map(rows.map((row) => [row.seq, row.entry]));
    const pages = new Map<number, string>();
    for (const { seq } of rows) {
      const page = this.sql
        .exec<{ last_seq: number; entries: string }>(
          "SELECT last_seq, entries FROM journal_pages WHERE last_seq >= ? ORDER BY last_seq LIMIT 1",
          seq,
        )
        .toArray()[0];
      if (page !== undefined && !pages.has(page.last_seq)) {
        pages.set(page.last_seq, page.entries);
      }
    }
    for (const [lastSeq, text] of pages) {
      const entries = (JSON.parse(text) as JournalEntry[]).map(
        (entry) => bySeq.get(entry.seq) ?? JSON.stringify(entry),
      );
      this.sql.exec("UPDATE journal_pages SET entries = ? WHERE last_seq = ?", `[${entries.join(",")}]`, lastSeq);
    }
  }
}

/** One row an entry: the layout of runs created before journal pages. */
export class JournalRows implements JournalTable {
  constructor(private readonly sql: SqlStorage) {}

  append(entries: readonly Pick<SignedEntryText, "seq" | "text">[]): void {
    for (const entry of entries) {
      this.sql.exec("INSERT INTO journal (seq, entry) VALUES (?, ?)", entry.seq, entry.text);
    }
  }

  read(afterSeq: number, limit: number): JournalEntry[] {
    return this.sql
      .exec<{ entry: string }>("SELECT entry FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit)
      .toArray()
      .map((row) => JSON.parse(row.entry) as JournalEntry);
  }

  last(): JournalEntry | undefined {
    const row = this.sql.exec<{ entry: string }>("SELECT entry FROM journal ORDER BY seq DESC LIMIT 1").toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.entry) as JournalEntry);
  }

  lastSeq(): number {
    return this.sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM journal").one().seq ?? 0;
  }

  lastAttestation(): JournalEntry | undefined {
    const row = this.sql
      .exec<{ entry: string }>(
        "SELECT entry FROM journal WHERE json_extract(entry, '$.kind') = 'attest' ORDER BY seq DESC LIMIT 1",
      )
      .toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.entry) as JournalEntry);
  }

  sealed(): { seq: number; entry: string }[] {
    return this.sql
      .exec<{ seq: number; entry: string }>(
        `SELECT seq, entry FROM journal WHERE json_extract(entry, '$.body."$salt"') IS NOT NULL ORDER BY seq`,
      )
      .toArray();
  }

  rewrite(rows: readonly { seq: number; entry: string }[]): void {
    for (const { seq, entry } of rows) {
      this.sql.exec("UPDATE journal SET entry = ? WHERE seq = ?", entry, seq);
    }
  }
}
