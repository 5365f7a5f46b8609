/**
 * What this instance has in flight, as a `wake` event hands it to `decide`.
 * The stored state alone cannot tell "in flight in this instance" from "lost
 * with the previous one" (a fresh instance has nothing live): whatever is
 * stored as outstanding and is not here was lost, and a wake sends it again.
 */
export interface LiveWork {
  /** Tokens of the dispatches whose results this instance awaits. */
  readonly tokens: ReadonlySet<string>;
  /** Keys of the child runs this instance is starting. */
  readonly childStarts: ReadonlySet<string>;
  /** Keys of the child runs whose cancel is in flight. */
  readonly cancels: ReadonlySet<string>;
  /** Durable names of the containers whose release is in flight. */
  readonly releases: ReadonlySet<string>;
  /** Names of the limit objects where giving up the run's slots is in flight. */
  readonly limitReleases: ReadonlySet<string>;
  /** This child run's report to its parent is in flight. */
  readonly notifying: boolean;
}

/** A wake of a fresh instance: nothing in flight. */
export const NOTHING_LIVE: LiveWork = {
  tokens: new Set(),
  childStarts: new Set(),
  cancels: new Set(),
  releases: new Set(),
  limitReleases: new Set(),
  notifying: false,
};

/** Builds the live work of a wake from lists (what tests and callers hold); what is left out is not live. */
export function toLiveWork(work: {
  tokens?: Iterable<string>;
  childStarts?: Iterable<string>;
  cancels?: Iterable<string>;
  releases?: Iterable<string>;
  limitReleases?: Iterable<string>;
  notifying?: boolean;
}): LiveWork {
  return {
    tokens: new Set(work.tokens),
    childStarts: new Set(work.childStarts),
    cancels: new Set(work.cancels),
    releases: new Set(work.releases),
    limitReleases: new Set(work.limitReleases),
    notifying: work.notifying ?? false,
  };
}

/** The Durable Object's record of its work in flight: each call adds its entry when sent and drops it when done. */
export class LiveSet {
  readonly tokens = new Set<string>();
  readonly childStarts = new Set<string>();
  readonly cancels = new Set<string>();
  readonly releases = new Set<string>();
  readonly limitReleases = new Set<string>();
  notifying = false;

  /** Whether anything is in flight (results then tend to arrive in bursts). */
  isBusy(): boolean {
    return (
      this.tokens.size > 0 ||
      this.childStarts.size > 0 ||
      this.cancels.size > 0 ||
      this.releases.size > 0 ||
      this.limitReleases.size > 0 ||
      this.notifying
    );
  }

  /** A copy for a wake event: the event sees the work in flight when it was made. */
  snapshot(): LiveWork {
    return toLiveWork(this);
  }

  /** Marks `names` in flight in `set` while `work` runs. */
  async during<T>(set: Set<string>, names: readonly string[], work: () => Promise<T>): Promise<T> {
    names.forEach((name) => set.add(name));
    try {
      return await work();
    } finally {
      names.forEach((name) => set.delete(name));
    }
  }
}
