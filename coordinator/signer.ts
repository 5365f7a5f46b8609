import { importSigningKey, signEntryText, type JournalSigningKey, type SignedEntryText } from "../lib/journal/index.ts";
import { sealedPointersOf } from "../schemas/journal-bodies.ts";
import type { TaskPayload } from "../schemas/payload.ts";
import { ensureEngineError } from "../lib/errors.ts";
import { Mutex } from "../lib/mutex.ts";
import { waitsOnIo } from "./executor-client.ts";
import type { Command } from "./draft.ts";
import type { RunStore, UnsignedEntry } from "./storage.ts";

/**
 * A decision that sends work in this many executor calls or more, of tasks
 * that wait on I/O, commits its journal entries unsigned and signs them while
 * the work runs. Narrower waves, and waves of pure computation that come back
 * at once, sign first: there the extra commit costs more than it saves.
 */
const DEFER_SIGNING_MIN_CALLS = 2;
/**
 * How long a wide wave's entries wait, once its calls are sent, before they
 * are signed: until its executor calls have sent their requests (locally they
 * share this thread: a fan-out of 100 sends its last request ≈ 30–38 ms after
 * `run.created`). The wait holds nothing up: a result that comes back sooner
 * is committed at once, and its commit signs the wave's entries first.
 */
const SIGN_AFTER_SEND_MS = 40;

/** What the signer needs of its Durable Object. */
export interface SignerDeps {
  storage: DurableObjectStorage;
  store: RunStore;
  /** The Ed25519 key (env.JOURNAL_SIGNING_KEY), imported on first use. */
  secret: string;
  /** New entries reached the journal: long polls may answer. */
  onAppended: () => void;
}

/** One decision's commit: its journal entries, the state write and the sends that follow it. */
export interface Commit {
  runId: string;
  journal: readonly UnsignedEntry[];
  /** Writes the decision's state; runs inside the commit's transaction. */
  save: () => void;
  /** Sends the decision's work; runs once the commit is durable. */
  send: () => void;
}

/**
 * The run's signed journal: each entry is signed, chained to the one before
 * it, and appended in the transaction of the decision that wrote it, in one
 * of two orders ({@link JournalSigner.commit}).
 */
export class JournalSigner {
  /** The hash the next entry chains to. */
  private lastHash: string | null = null;
  /** Entries committed with their decision but not signed yet (a wide wave signs after dispatching). */
  private unsigned: UnsignedEntry[] = [];
  private key: Promise<JournalSigningKey> | null = null;
  /** Commits and signing, one at a time: a wave's delayed signing runs beside the run's events. */
  private readonly chain = new Mutex();

  constructor(private readonly deps: SignerDeps) {}

  /** On load: the chain's end, and entries a restart left unsigned, signed now. */
  async restore(runId: string, lastHash: string | null): Promise<void> {
    this.lastHash = lastHash;
    this.unsigned = this.deps.store.unsigned();
    if (this.unsigned.length > 0) {
      await this.signUnsigned(runId); // A restart came between a wave's commit and its signing.
    }
  }

  /** A new run's journal starts with the next commit, whatever an earlier failed attempt signed. */
  startChain(): void {
    this.lastHash = null;
    this.unsigned = [];
  }

  /**
   * Commits a decision: a wide wave of I/O tasks commits, sends and then signs;
   * anything else signs, commits and then sends. Returns the entries signed.
   */
  commit(commit: Commit, groups: readonly TaskPayload[][]): Promise<SignedEntryText[]> {
    const deferred = groups.length >= DEFER_SIGNING_MIN_CALLS && groups.some((group) => group.some(waitsOnIo));
    return this.chain.run(() => (deferred ? this.commitSendSign(commit) : this.signCommitSend(commit)));
  }

  /**
   * The usual order: sign the decision's journal entries, commit them with the
   * state in one transaction, then send the work. Entries an earlier wave left
   * unsigned (its signing failed) go first.
   */
  private async signCommitSend({ runId, journal, save, send }: Commit): Promise<SignedEntryText[]> {
    const pending = this.unsigned;
    const entries = await this.sign(runId, [...pending, ...journal]);
    this.deps.storage.transactionSync(() => {
      save();
      if (pending.length > 0) {
        this.deps.store.appendSigned(entries);
      } else {
        this.deps.store.appendJournal(entries);
      }
    });
    this.unsigned = [];
    if (entries.length > 0) {
      this.deps.onAppended();
    }
    send();
    return entries;
  }

  /**
   * A wide wave of I/O tasks: commit the decision with its entries unsigned,
   * send the work, and sign while it runs. Signing a hundred entries first
   * would hold every task back by that long; a restart in between signs them
   * on load (Ed25519 is deterministic: the same entries). The decision waits
   * for its signing only when it attested the run (what follows an
   * attestation, the parent's notification, cites it signed); otherwise it is
   * done once its work is sent, and the signing runs later, between events.
   */
  private async commitSendSign({ runId, journal, save, send }: Commit): Promise<SignedEntryText[]> {
    this.deps.storage.transactionSync(() => {
      save();
      this.deps.store.putUnsigned(journal);
    });
    this.unsigned.push(...journal);
    send();
    const later = () => new Promise((resolve) => setTimeout(resolve, SIGN_AFTER_SEND_MS));
    if (journal.some((entry) => entry.kind === "attest")) {
      await later();
      return this.signUnsigned(runId);
    }
    void later()
      .then(() => this.chain.run(() => this.signUnsigned(runId)))
      .catch((error: unknown) => {
        // The entries stay unsigned (here and in storage): the next commit, or a restart, signs them first.
        console.error(
          JSON.stringify({ msg: "signing a wave's entries failed", error: ensureEngineError(error).message }),
        );
      });
    return [];
  }

  /** Signs now whatever a wide wave left unsigned, so that the stored journal is the whole journal. */
  flush(runId: string): Promise<SignedEntryText[]> {
    return this.chain.run(() => this.signUnsigned(runId));
  }

  /**
   * Signs the entries a wide dispatch wave left unsigned (or a restart found
   * unsigned) and appends them to the journal.
   */
  private async signUnsigned(runId: string): Promise<SignedEntryText[]> {
    const pending = this.unsigned;
    if (pending.length === 0) {
      return [];
    }
    const entries = await this.sign(runId, pending);
    this.deps.storage.transactionSync(() => this.deps.store.appendSigned(entries));
    this.unsigned = this.unsigned.slice(pending.length);
    this.deps.onAppended();
    return entries;
  }

  /** Signs journal entries in order, chained to the last one signed. */
  private async sign(runId: string, unsigned: readonly UnsignedEntry[]): Promise<SignedEntryText[]> {
    if (unsigned.length === 0) {
      return [];
    }
    const key = await this.signingKey();
    const entries: SignedEntryText[] = [];
    let prev = this.lastHash;
    for (const { seq, kind, at, body } of unsigned) {
      // Content members are sealed with a fresh salt (docs/journal.md, "Sealed values and erasure").
      const seal = sealedPointersOf(kind, body);
      const fields = { seq, run_id: runId, kind, at, body, prev };
      const entry = await signEntryText(key, fields, seal.length === 0 ? {} : { seal });
      entries.push(entry);
      prev = entry.hash;
    }
    this.lastHash = prev;
    return entries;
  }

  private signingKey(): Promise<JournalSigningKey> {
    this.key ??= importSigningKey(this.deps.secret);
    return this.key;
  }
}

/** The journal entries among a decision's commands, stamped with the event's time. */
export function journalOf(commands: readonly Command[], at: string): UnsignedEntry[] {
  return commands.flatMap((command): UnsignedEntry[] =>
    command.kind === "journal" ? [{ seq: command.seq, kind: command.entryKind, at, body: command.body }] : [],
  );
}
