import { blobWriter, MAX_RESOLVED_BLOB_BYTES, offloadForRun, resolveRefs } from "../blobs/offload.ts";
import { sensitiveAsBlobs } from "../blobs/sensitive.ts";
import { blobRefsIn, hasBlobRef } from "../blobs/ref.ts";
import { getBlob, holdBlobs, type BlobHolder } from "../blobs/store.ts";
import { withBlobLookup, type BlobLookup } from "../lib/expr/blob-scope.ts";
import { EngineError } from "../lib/errors.ts";
import type { BlobRef } from "../schemas/blobs.ts";
import type { Json } from "../schemas/common.ts";

/** The failures of reading a blob that every later read would meet too: remembered, and the decision goes on with them. */
const LASTING_FAILURES = new Set(["blob.corrupt", "blob.not_found", "blob.too_large"]);

/**
 * One run's blobs as its coordinator sees them (docs/architecture.md, "Blobs"): the
 * values that enter the run (its input, gate answers, signals and events) are offloaded
 * here before a decision sees them, and decisions read blobs through this cache
 * (lib/expr/blob-scope.ts): a decision that needed blobs not read yet is dropped, they
 * are read from R2 (checked against their digests), and the decision is made again.
 * A run that never held a reference never enters the scope: its decisions pay nothing.
 */
export class RunBlobs implements BlobLookup {
  /** Whether the run holds any blob reference (its decisions then run in the scope). */
  active = false;
  private readonly values = new Map<string, Json>();
  private readonly failures = new Map<string, EngineError>();
  private readonly needed = new Map<string, BlobRef>();
  private cachedBytes = 0;

  constructor(private readonly env: Env) {}

  /** Notes the references a value brings into the run (a loaded state, a task result). */
  notice(value: unknown): void {
    if (!this.active && hasBlobRef(value)) {
      this.active = true;
    }
  }

  /** A value entering the run: its large parts stored as blobs held by the run, and references it brings held too. */
  async intake(value: Json, holder: BlobHolder, sensitive: readonly string[][] = []): Promise<Json> {
    const marked =
      sensitive.length === 0 ? value : await sensitiveAsBlobs(value, sensitive, blobWriter(this.env, holder));
    const kept = await offloadForRun(this.env, marked, holder);
    const refs = blobRefsIn(kept);
    if (refs.length > 0) {
      await holdBlobs(this.env, refs, holder);
      this.active = true;
    }
    return kept;
  }

  /** Holds the blobs values already offloaded elsewhere refer to (events the hubs kept, as their references). */
  async hold(values: readonly unknown[], holder: BlobHolder): Promise<void> {
    const refs = values.flatMap((value) => blobRefsIn(value));
    if (refs.length > 0) {
      await holdBlobs(this.env, refs, holder);
      this.active = true;
    }
  }

  cached(ref: BlobRef): unknown {
    const failure = this.failures.get(ref.$blob);
    if (failure !== undefined) {
      throw failure;
    }
    return this.values.get(ref.$blob);
  }

  need(ref: BlobRef): void {
    this.needed.set(ref.$blob, ref);
  }

  /**
   * Makes a pure decision; while it needs blobs not read yet, reads them and makes it again.
   * Ends: each round reads (or records the failure of) every blob the last one needed.
   */
  async decide<T>(work: () => T): Promise<T> {
    if (!this.active) {
      return work();
    }
    if (this.cachedBytes > MAX_RESOLVED_BLOB_BYTES / 2) {
      this.forget();
    }
    for (;;) {
      this.needed.clear();
      let outcome: { ok: true; value: T } | { ok: false; thrown: unknown };
      try {
        outcome = { ok: true, value: withBlobLookup(this, work) };
      } catch (thrown) {
        outcome = { ok: false, thrown };
      }
      if (this.needed.size === 0) {
        if (!outcome.ok) {
          throw outcome.thrown;
        }
        return outcome.value;
      }
      await this.read([...this.needed.values()]);
    }
  }

  private async read(refs: readonly BlobRef[]): Promise<void> {
    for (const ref of refs) {
      try {
        if (this.cachedBytes + ref.size > MAX_RESOLVED_BLOB_BYTES) {
          throw EngineError.terminal(
            "blob.too_large",
            `blob ${ref.$blob} (${ref.size} bytes) is over what one decision may read (${MAX_RESOLVED_BLOB_BYTES} bytes of blobs)`,
          );
        }
        const budget = { left: MAX_RESOLVED_BLOB_BYTES - this.cachedBytes - ref.size };
        const value = await resolveRefs(this.env, (await getBlob(this.env, ref)) as Json, budget);
        this.values.set(ref.$blob, value);
        this.cachedBytes += ref.size;
      } catch (thrown) {
        if (!(thrown instanceof EngineError) || !LASTING_FAILURES.has(thrown.code)) {
          throw thrown;
        }
        this.failures.set(ref.$blob, thrown);
      }
    }
  }

  private forget(): void {
    this.values.clear();
    this.failures.clear();
    this.cachedBytes = 0;
  }
}
