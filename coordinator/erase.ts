import { EngineError } from "../lib/errors.ts";
import { eraseSealed } from "../lib/journal/seal.ts";
import type { By } from "../schemas/auth.ts";
import { ERASED_KIND } from "../schemas/journal.ts";
import type { JournalBody } from "../schemas/journal-bodies.ts";
import type { InvocationRecord, NodeRecord, RunErasure, RunRecord } from "../schemas/run.ts";
import type { RunState } from "./decide.ts";
import { isTerminal } from "./lifecycle.ts";
import type { UnsignedEntry } from "./storage.ts";

/**
 * A run's erasure (docs/security.md, "Erasure"; docs/journal.md, "Sealed
 * values and erasure"): what it refuses, what it removes from the run's state
 * and journal, and the `erased` entry that records it. The Durable Object
 * performs it (coordinator.ts `erase`); everything here is pure.
 */

/**
 * Throws 409 `run.not_terminal` unless the run has ended: completed, failed
 * or cancelled, with no compensation running (its undos read their inputs).
 */
export function assertErasable(record: RunRecord): void {
  if (!isTerminal(record.status)) {
    throw EngineError.terminal(
      "run.not_terminal",
      `only a run that has ended can be erased; this one is ${record.status} (cancel it first)`,
    );
  }
  if (record.compensation?.status === "running") {
    throw EngineError.terminal(
      "run.not_terminal",
      "the run is compensating: it can be erased once its compensation has ended",
    );
  }
}

/** A journal row whose sealed values are to be removed: its seq and its text once they are. */
export interface ErasedRow {
  seq: number;
  entry: string;
}

/**
 * The stored journal rows that hold sealed values (those with `$salt`),
 * each rewritten without its values and salt. An entry signed before sealed
 * members existed holds none: its values stay where they were signed.
 */
export function erasedRows(rows: readonly { seq: number; entry: string }[]): ErasedRow[] {
  return rows.flatMap(({ seq, entry }) => {
    const parsed = JSON.parse(entry) as { body: Record<string, unknown> };
    const { body, removed } = eraseSealed(parsed.body);
    return removed.length === 0 ? [] : [{ seq, entry: JSON.stringify({ ...parsed, body }) }];
  });
}

/** The `erased` entry: it follows the run's last entry (its attestation). */
export function erasedEntry(record: RunRecord, erasure: RunErasure): UnsignedEntry {
  return erasedEntryAt(record.journal_seq + 1, erasure);
}

/** The `erased` entry at `seq`: the seq after the journal's last entry. */
export function erasedEntryAt(seq: number, erasure: RunErasure): UnsignedEntry {
  const body: JournalBody<typeof ERASED_KIND> = {
    reason: erasure.reason,
    seqs: erasure.seqs,
    blobs: erasure.blobs,
    ...(erasure.by === undefined ? {} : { by: erasure.by }),
  };
  return {
    seq,
    kind: ERASED_KIND,
    at: new Date(erasure.at).toISOString(),
    body,
  };
}

/** What erasing needs to know: when, who, why, and what it removed. */
export interface Erasure {
  at: number;
  by: By | undefined;
  reason: string;
  seqs: number[];
  blobs: string[];
}

/**
 * The run's state without its data: the input, the context's state and
 * output, each invocation's input, output and suspension, each gate's
 * answer, each undo's input and the signals kept for a wait. What stays:
 * statuses, times, names, error codes and messages, usage, and `erased`.
 */
export function erasedState(state: RunState, erasure: Erasure): RunState {
  const { record } = state;
  const erased: RunErasure = {
    at: erasure.at,
    ...(erasure.by === undefined ? {} : { by: erasure.by }),
    reason: erasure.reason,
    seqs: erasure.seqs,
    blobs: erasure.blobs,
  };
  const { signals: _signals, ...kept } = record;
  const nodes: Record<string, NodeRecord> = {};
  for (const [id, node] of Object.entries(state.nodes)) {
    nodes[id] = { ...node, invocations: node.invocations.map(erasedInvocation) };
  }
  return {
    record: {
      ...kept,
      context: { input: null, state: {}, output: {} },
      gates: record.gates.map(({ response: _response, ...gate }) => gate),
      ...(record.undos === undefined ? {} : { undos: record.undos.map(({ input: _input, ...undo }) => undo) }),
      journal_seq: record.journal_seq + 1,
      updated_at: erasure.at,
      erased,
    },
    nodes,
  };
}

function erasedInvocation(invocation: InvocationRecord): InvocationRecord {
  const { input: _input, output: _output, suspension: _suspension, resume: _resume, ...kept } = invocation;
  return kept;
}
