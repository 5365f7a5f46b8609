import { WorkerEntrypoint } from "cloudflare:workers";
import type { JournalEntry } from "../lib/journal/index.ts";
import { toResult, type Result } from "../lib/result.ts";
import type { DefinitionRecord, GateView, Jwks, RegisterResponse, RunView, StartRunResponse } from "../schemas/index.ts";
import * as service from "./service.ts";

/**
 * The API as a Workers RPC entrypoint, for other Workers:
 * `[[services]] binding = "TRELLIS", service = "trellis", entrypoint = "TrellisApi"`.
 * Every method returns a Result: errors arrive as data with their code.
 */
export class TrellisApi extends WorkerEntrypoint<Env> {
  registerDefinitions(bundle: unknown): Promise<Result<RegisterResponse>> {
    return toResult(() => service.registerDefinitions(this.env, bundle));
  }

  getDefinition(kind: string, id: string, version?: number): Promise<Result<DefinitionRecord>> {
    return toResult(() => service.getDefinition(this.env, kind, id, version));
  }

  startRun(workflowId: string, request: unknown): Promise<Result<StartRunResponse & { created: boolean }>> {
    return toResult(async () => {
      const { created, run } = await service.startRun(this.env, workflowId, request, "rpc");
      return { ...run, created };
    });
  }

  getRun(runId: string): Promise<Result<RunView>> {
    return toResult(() => service.getRun(this.env, runId));
  }

  getJournal(runId: string): Promise<Result<{ entries: JournalEntry[] }>> {
    return toResult(() => service.getJournal(this.env, runId));
  }

  cancelRun(runId: string, reason?: string): Promise<Result<RunView>> {
    return toResult(() => service.cancelRun(this.env, runId, reason));
  }

  pauseRun(runId: string): Promise<Result<RunView>> {
    return toResult(() => service.controlRun(this.env, runId, "pause"));
  }

  resumeRun(runId: string): Promise<Result<RunView>> {
    return toResult(() => service.controlRun(this.env, runId, "resume"));
  }

  redriveRun(runId: string): Promise<Result<RunView>> {
    return toResult(() => service.controlRun(this.env, runId, "redrive"));
  }

  approveRun(runId: string): Promise<Result<RunView>> {
    return toResult(() => service.controlRun(this.env, runId, "approve"));
  }

  /** Journal entries after `afterSeq`, waiting up to `waitMs` for the next ones: the event stream over RPC. */
  runEvents(runId: string, afterSeq = 0, waitMs = 0): Promise<Result<JournalEntry[]>> {
    return toResult(() => service.runEvents(this.env, runId, afterSeq, waitMs));
  }

  listGates(runId: string): Promise<Result<{ gates: GateView[] }>> {
    return toResult(() => service.listGates(this.env, runId));
  }

  answerGate(runId: string, gateId: string, answer: unknown): Promise<Result<GateView>> {
    return toResult(() => service.answerGate(this.env, runId, gateId, answer));
  }

  journalKeys(): Promise<Result<Jwks>> {
    return toResult(() => service.journalKeys(this.env));
  }
}
