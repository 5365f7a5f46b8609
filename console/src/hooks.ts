/** Data loading for the pages (one request's state, refreshed on demand or on a timer), and the time now, ticking. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  /** Loads again (keeping the current data shown until the answer comes). */
  reload: () => void;
}

/**
 * Runs `load` when `deps` change, again on `reload()`, and every
 * `refreshMs` while the tab is visible (when given). Answers to stale
 * requests are dropped.
 */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[], refreshMs?: number): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const generation = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(() => {
    const mine = ++generation.current;
    loadRef.current().then(
      (value) => {
        if (mine === generation.current) {
          setData(value);
          setError(null);
        }
      },
      (failure: unknown) => {
        if (mine === generation.current) {
          setError(failure);
        }
      },
    );
  }, []);
  useEffect(() => {
    setData(undefined);
    reload();
    if (refreshMs === undefined) {
      return undefined;
    }
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") {
        reload();
      }
    }, refreshMs);
    return () => clearInterval(timer);
    // The caller names what the load depends on (`deps`); `load` itself is read through a ref.
  }, deps);
  return { data, error, reload };
}

/** How often {@link useNow} reads the clock while it ticks. */
const NOW_TICK_MS = 1_000;

/** The time now, read again every second while `ticking`. */
export function useNow(ticking: boolean): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    if (!ticking) {
      return undefined;
    }
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), NOW_TICK_MS);
    return () => clearInterval(timer);
  }, [ticking]);
  return now;
}
