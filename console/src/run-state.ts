/**
 * Everything the run page shows, kept live: the run view, its workflow's
 * definition (for the graph), the journal as it streams in, and the browser's
 * own verification of that journal. Each batch of new entries refreshes the
 * view (node statuses, gates) and re-verifies the whole journal.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { DefinitionRecord, RunView } from "../../schemas/api.ts";
import { apiFetch, apiJson, encodeSegment } from "./api.ts";
import { followJournal, type ReceivedEntry } from "./events.ts";
import { verifyInBrowser, type Verification } from "./verify.ts";

export interface RunState {
  view: RunView | undefined;
  definition: DefinitionRecord | null | undefined;
  entries: ReceivedEntry[];
  verification: Verification;
  error: unknown;
  /** Reads the view again and, when the stream had ended (an attested run that was redriven), follows it again. */
  refresh: () => void;
}

const VIEW_REFRESH_DELAY_MS = 150;
const VERIFY_DELAY_MS = 250;

export function useRunState(runId: string): RunState {
  const [view, setView] = useState<RunView | undefined>(undefined);
  const [entries, setEntries] = useState<ReceivedEntry[]>([]);
  const [verification, setVerification] = useState<Verification>({ state: "waiting" });
  const [error, setError] = useState<unknown>(null);
  const [followRound, setFollowRound] = useState(0);
  const held = useRef<ReceivedEntry[]>([]);
  const following = useRef(false);
  const jwks = useRef<Promise<unknown> | null>(null);

  const loadView = useCallback(() => {
    apiJson(RunView, `/v1/runs/${encodeSegment(runId)}`).then(setView, setError);
  }, [runId]);
  const viewSoon = useDebounced(loadView, VIEW_REFRESH_DELAY_MS);
  const verifySoon = useDebounced(
    useCallback(() => {
      jwks.current ??= fetchJwks();
      void verifyInBrowser(runId, held.current, jwks.current).then(setVerification);
    }, [runId]),
    VERIFY_DELAY_MS,
  );

  useEffect(loadView, [loadView]);
  useEffect(() => {
    const controller = new AbortController();
    following.current = true;
    void followJournal(runId, {
      after: held.current.at(-1)?.entry.seq ?? 0,
      signal: controller.signal,
      onEntries: (batch) => {
        held.current = [...held.current, ...batch];
        setEntries(held.current);
        viewSoon();
        verifySoon();
      },
      onError: setError,
    }).finally(() => {
      following.current = false;
    });
    return () => controller.abort();
  }, [runId, followRound, viewSoon, verifySoon]);

  const definition = useDefinition(view);
  const refresh = useCallback(() => {
    loadView();
    if (!following.current) {
      setFollowRound((round) => round + 1);
    }
  }, [loadView]);
  return { view, definition, entries, verification, error, refresh };
}

/**
 * The run's pinned workflow version (for the graph); null when there is none
 * to read (a run of an agent plan has no registered workflow: the graph is
 * then drawn from the view's nodes). Read once per version: it never changes.
 */
function useDefinition(view: RunView | undefined): DefinitionRecord | null | undefined {
  const [definition, setDefinition] = useState<DefinitionRecord | null | undefined>(undefined);
  const workflow = view?.workflow;
  const key = workflow === undefined ? null : `${workflow.id}@${workflow.version}`;
  useEffect(() => {
    if (workflow === undefined) {
      return;
    }
    const path = `/v1/workflows/${encodeSegment(workflow.id)}/versions/${workflow.version}`;
    apiJson(DefinitionRecord, path).then(setDefinition, () => setDefinition(null));
  }, [key]);
  return definition;
}

/** `fn`, called at most once per `delayMs` after the last call. */
function useDebounced(fn: () => void, delayMs: number): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(fn, delayMs);
  }, [fn, delayMs]);
}

/** The journal's public keys (`GET /v1/journal-keys`), fetched once per run page. */
async function fetchJwks(): Promise<unknown> {
  const res = await apiFetch("/v1/journal-keys");
  return (await res.json()) as unknown;
}
