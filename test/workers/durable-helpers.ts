import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { onTestFinished } from "vitest";

/** The coordinator Durable Object of a run (one per run id). */
export function stubOf(runId: string) {
  return env.COORDINATOR.get(env.COORDINATOR.idFromName(runId));
}

/** The one catalog Durable Object. */
export const catalogStub = () => env.CATALOG.get(env.CATALOG.idFromName("catalog"));

/** When the object's stored alarm is due (read inside the live instance, before the crash). */
export function storedAlarm(runId: string): Promise<number | null> {
  return runInDurableObject(stubOf(runId), (_instance, state) => state.storage.getAlarm());
}

/**
 * Holds every event to a Durable Object (input gate closed) until `release`:
 * a call to it stays in flight, as one does when the process dies mid-call.
 */
export function hold(stub: DurableObjectStub): { release: () => void } {
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  runInDurableObject(stub, (_instance, state) => state.blockConcurrencyWhile(() => gate)).catch(() => {
    // The abort that stages the crash ends this call too.
  });
  // Released in any case, so a failing test leaves no object held for the next.
  onTestFinished(() => release());
  return { release: () => release() };
}
