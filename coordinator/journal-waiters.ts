/** The longest a long poll for events waits. */
const MAX_EVENTS_WAIT_MS = 30_000;

/** Long polls waiting for the next journal entries: each is released by new entries or its timeout. */
export class JournalWaiters {
  private readonly waiting = new Set<() => void>();

  /** Resolves when entries are appended, or after `waitMs` (at most MAX_EVENTS_WAIT_MS). */
  wait(waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        // A poll that timed out leaves the set too: a run that has ended appends nothing to clear it.
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(waitMs, MAX_EVENTS_WAIT_MS));
      this.waiting.add(done);
    });
  }

  /**
   * Resolves once `done()` holds, asked again each time entries are appended,
   * or after `waitMs`, whichever comes first.
   */
  async until(done: () => boolean, waitMs: number): Promise<void> {
    const deadline = Date.now() + waitMs;
    while (!done() && Date.now() < deadline) {
      await this.wait(deadline - Date.now());
    }
  }

  /** New entries reached the journal: every long poll answers. */
  release(): void {
    const waiters = [...this.waiting];
    this.waiting.clear();
    for (const wake of waiters) {
      wake();
    }
  }
}
