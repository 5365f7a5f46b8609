import { ensureEngineError } from "../lib/errors.ts";
import { resolvePlanSnapshot, resolveSnapshotResult } from "../catalog/snapshots.ts";
import type { JournalEntry } from "../schemas/journal.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import { cancelChildRuns, notifyParentRun, startChildRun, type RunPeer, type RunPeers } from "./children.ts";
import type { Command } from "./draft.ts";
import type { RunEvent } from "./events.ts";
import type { LiveSet } from "./live.ts";
import { registerWait, unregisterWait } from "../events/route.ts";
import { dataDigest } from "./event-digest.ts";
import { limitLeaseMs, limitObject } from "../limits/route.ts";
import { splitLimitObjectName } from "../limits/names.ts";
import { unwrap } from "../lib/result.ts";

/** What a command reads of the last journal entry its decision signed. */
type LastEntry = Pick<JournalEntry, "seq" | "kind" | "hash">;

/** What performing a command needs of the Durable Object. */
export interface CommandDeps {
  env: Env;
  /** The work in flight in this instance: each call is live while it runs. */
  live: LiveSet;
  waitUntil: (promise: Promise<unknown>) => void;
  /** Applies the event a call's answer makes (through the inbox). */
  apply: (event: RunEvent) => Promise<void>;
  /** The run's id, or null before it exists. */
  runId: () => string | null;
  /** The W3C trace context the run joined, or null (its own trace): handed on to its children. */
  traceParent: () => TraceParent | null;
  /** The attestation that closes this run's journal, read from storage. */
  attestation: () => Attestation | null;
}

type Attestation = { seq: number; hash: string };

type CommandHandlers = {
  [K in Command["kind"]]: (
    command: Extract<Command, { kind: K }>,
    deps: CommandDeps,
    lastEntry: LastEntry | undefined,
  ) => void;
};

/**
 * How each command is carried out, one row per kind (a new kind fails to
 * compile until it has one). Every command is performed after the commit
 * of the decision that made it, and a call in flight is live until its
 * answer is applied, so no wake meanwhile sends it twice.
 */
const COMMANDS: CommandHandlers = {
  // Committed with the decision's state, in the same transaction (signer.ts): nothing left to do.
  journal: () => {},
  // Sent by the commit itself, as soon as it is durable (JournalSigner.commit), before the rest.
  dispatch: () => {},
  release_resources: (command, deps) => deps.waitUntil(releaseContainers(deps, command.containers)),
  start_child: (command, deps) => deps.waitUntil(startChild(deps, command)),
  cancel_children: (command, deps) => deps.waitUntil(cancelChildren(deps, command.keys)),
  register_event_wait: (command, deps) => deps.waitUntil(registerEventWait(deps, command)),
  unregister_event_wait: (command, deps) => deps.waitUntil(unregisterEventWait(deps, command)),
  queue_for_limit: (command, deps) => deps.waitUntil(queueForLimit(deps, command)),
  withdraw_from_limit: (command, deps) => deps.waitUntil(withdrawFromLimit(deps, command)),
  release_limits: (command, deps) => deps.waitUntil(releaseLimits(deps, command.objects)),
  notify_parent: (command, deps, lastEntry) => {
    const attestation =
      lastEntry?.kind === "attest" ? { seq: lastEntry.seq, hash: lastEntry.hash } : deps.attestation();
    deps.waitUntil(notifyParent(deps, command, attestation));
  },
};

/** Performs a decision's commands after its commit; `lastEntry` is the last journal entry it signed. */
export function perform(commands: readonly Command[], deps: CommandDeps, lastEntry: LastEntry | undefined): void {
  for (const command of commands) {
    performOne(command.kind, command, deps, lastEntry);
  }
}

/** One command by its row: generic over the kind, so the row and the command are checked as a pair. */
function performOne<K extends Command["kind"]>(
  kind: K,
  command: Extract<Command, { kind: K }>,
  deps: CommandDeps,
  lastEntry: LastEntry | undefined,
): void {
  const handler: CommandHandlers[K] = COMMANDS[kind];
  handler(command, deps, lastEntry);
}

/**
 * Registers an event wait at its hubs, and applies what they answer (the
 * events they kept that it takes). A failure is logged: the wait stays
 * registered-but-unanswered, and a later wake sends the registration again.
 */
async function registerEventWait(
  deps: CommandDeps,
  command: Extract<Command, { kind: "register_event_wait" }>,
): Promise<void> {
  try {
    const events = await registerWait(deps.env, command.registration);
    const received = await Promise.all(
      events.map(async (event) => ({ event, data_sha256: await dataDigest(event.data) })),
    );
    await deps.apply({ type: "event_registered", key: command.key, events: received });
  } catch (thrown) {
    console.error(
      JSON.stringify({
        msg: "event wait registration failed",
        key: command.key,
        error: ensureEngineError(thrown).message,
      }),
    );
  }
}

/** Tells an ended event wait's hubs to forget it; a failure only costs a delivery the run answers `not_waiting`. */
async function unregisterEventWait(
  deps: CommandDeps,
  command: Extract<Command, { kind: "unregister_event_wait" }>,
): Promise<void> {
  const runId = deps.runId();
  if (runId === null) {
    return;
  }
  try {
    await unregisterWait(deps.env, { wait_key: command.key, run_id: runId, names: command.names });
  } catch (thrown) {
    console.error(
      JSON.stringify({
        msg: "event wait unregistration failed",
        key: command.key,
        error: ensureEngineError(thrown).message,
      }),
    );
  }
}

/**
 * Queues a holder at its limit object and applies the answer (held now, or
 * queued). A failure is logged: the request stays unanswered and a later wake
 * sends it again (queueing is idempotent per holder).
 */
async function queueForLimit(deps: CommandDeps, command: Extract<Command, { kind: "queue_for_limit" }>): Promise<void> {
  try {
    const answer = unwrap(
      await limitObject(deps.env, command.limit.id, command.key).acquire({
        config: command.limit,
        key: command.key,
        holder: command.holder,
        lease_ms: command.lease === "run" ? null : limitLeaseMs(deps.env),
        queue: true,
      }),
    );
    await deps.apply({ type: "limit_queued", holder_id: command.holder.id, answer });
  } catch (thrown) {
    logFailure("queueing at a limit failed; a wake sends it again", command.limit.id, thrown);
  }
}

/** Drops a closed wait's holder from its limit object; lost, the object's grant is answered "not wanted". */
async function withdrawFromLimit(
  deps: CommandDeps,
  command: Extract<Command, { kind: "withdraw_from_limit" }>,
): Promise<void> {
  const runId = deps.runId();
  if (runId === null) {
    return;
  }
  try {
    unwrap(
      await limitObject(deps.env, command.limit, command.key).withdraw({
        run_id: runId,
        holder_ids: command.holder_ids,
      }),
    );
  } catch (thrown) {
    logFailure("withdrawing from a limit failed", command.limit, thrown);
  }
}

/**
 * Gives up every slot and place of the run at these limit objects. Those that
 * answered leave `pending_limit_releases`; a wake sends the others again.
 */
async function releaseLimits(deps: CommandDeps, objects: readonly string[]): Promise<void> {
  const runId = deps.runId();
  if (runId === null) {
    return;
  }
  await deps.live.during(deps.live.limitReleases, objects, async () => {
    const answered = await Promise.all(
      objects.map(async (name) => {
        const { limit, key } = splitLimitObjectName(name);
        try {
          unwrap(await limitObject(deps.env, limit, key).withdraw({ run_id: runId }));
          return name;
        } catch (thrown) {
          logFailure("giving up a limit's slots failed; a wake tries again", limit, thrown);
          return null;
        }
      }),
    );
    const released = answered.filter((name): name is string => name !== null);
    if (released.length > 0) {
      await deps.apply({ type: "limits_released", objects: released });
    }
  });
}

function logFailure(msg: string, limit: string, thrown: unknown): void {
  console.error(JSON.stringify({ msg, limit, error: ensureEngineError(thrown).message }));
}

/** Peers a run talks to about its children and its parent. */
function peersOf(env: Env): RunPeers {
  return {
    // Through the snapshot caches, like a start over the API: a pinned child may not need the catalog at all.
    catalog: () => ({
      resolveRun: (workflowId, version) => resolveSnapshotResult(env, workflowId, version),
      resolvePlan: (workflow) => resolvePlanSnapshot(env, workflow),
    }),
    planPreapproval: env.PLAN_PREAPPROVAL === "allow",
    run: (runId) => env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as RunPeer,
  };
}

async function startChild(deps: CommandDeps, command: Extract<Command, { kind: "start_child" }>): Promise<void> {
  const runId = deps.runId();
  if (runId === null || deps.live.childStarts.has(command.key)) {
    return;
  }
  // While starting, the key is live: a wake meanwhile must not ask for the child again.
  await deps.live.during(deps.live.childStarts, [command.key], async () =>
    deps.apply(await startChildRun(peersOf(deps.env), { runId, traceparent: deps.traceParent() }, command)),
  );
}

async function notifyParent(
  deps: CommandDeps,
  command: Extract<Command, { kind: "notify_parent" }>,
  attestation: Attestation | null,
): Promise<void> {
  // While the report is in flight, a wake (one that sends cleanup right after the end) does not send another.
  deps.live.notifying = true;
  try {
    if (await notifyParentRun(peersOf(deps.env), deps.runId(), command, attestation)) {
      await deps.apply({ type: "parent_notified" });
    }
  } finally {
    deps.live.notifying = false;
  }
}

/**
 * Cancels child runs. Those that confirmed (or had ended, or never existed)
 * leave `pending_cancels`; the others stay, and a later wake sends them
 * again. The keys are live until the confirmation is applied, so no wake
 * meanwhile sends them twice.
 */
async function cancelChildren(deps: CommandDeps, keys: readonly string[]): Promise<void> {
  try {
    await deps.live.during(deps.live.cancels, keys, async () => {
      const confirmed = await cancelChildRuns(peersOf(deps.env), keys);
      if (confirmed.length > 0) {
        await deps.apply({ type: "children_cancelled", keys: confirmed });
      }
    });
  } catch (error) {
    console.error(
      JSON.stringify({
        msg: "recording cancelled children failed; a wake sends the cancels again",
        error: ensureEngineError(error).message,
      }),
    );
  }
}

/**
 * Stops the run's containers (`release()` is idempotent: a container that
 * is already gone answers too). Those that answered leave
 * `pending_releases`; a failed call stays, and a later wake sends it again.
 */
async function releaseContainers(deps: CommandDeps, names: readonly string[]): Promise<void> {
  try {
    await deps.live.during(deps.live.releases, names, async () => {
      const answered = await Promise.all(names.map((name) => releaseContainer(deps.env, name)));
      const released = answered.filter((name): name is string => name !== null);
      if (released.length > 0) {
        await deps.apply({ type: "containers_released", containers: released });
      }
    });
  } catch (error) {
    console.error(
      JSON.stringify({
        msg: "recording released containers failed; a wake releases them again",
        error: ensureEngineError(error).message,
      }),
    );
  }
}

/** Releases one container; its name once it answered, null when the call failed. */
async function releaseContainer(env: Env, name: string): Promise<string | null> {
  const sandbox = env.SANDBOX;
  if (!sandbox) {
    return name; // No containers in this deployment: nothing to stop.
  }
  try {
    await sandbox.get(sandbox.idFromName(name)).release();
    return name;
  } catch (error) {
    console.error(
      JSON.stringify({
        msg: "releasing a container failed; a wake tries again",
        container: name,
        error: ensureEngineError(error).message,
      }),
    );
    return null;
  }
}
