import type { ResourceHandle } from "../schemas/payload.ts";
import type { Draft } from "./draft.ts";

// The containers a run's nodes use: its own, one per declared resource, or the ones its parent handed down.

/**
 * The durable name of a run's container for one declared resource: one
 * container per (run, resource), the same for every node that binds it.
 */
export function containerName(runId: string, resource: string): string {
  return `${runId}/${resource}`;
}

/**
 * `resource_bindings` (name → declared resource) resolved to container
 * handles: this run's own container for the resource, or the one its parent
 * handed down under that resource's name.
 */
export function resourcesOf(
  draft: Draft,
  bindings: Record<string, string> | undefined,
): Record<string, ResourceHandle> {
  const resources: Record<string, ResourceHandle> = {};
  for (const [name, resource] of Object.entries(bindings ?? {})) {
    resources[name] = draft.record.inherited_resources[resource] ?? {
      type: "container",
      id: containerName(draft.record.run_id, resource),
    };
  }
  return resources;
}

/**
 * What a sub-workflow node hands its child: each binding maps a resource the
 * child declares to one of this run's, and the child uses that container as
 * this run (its owner) would.
 */
export function handedDown(
  draft: Draft,
  bindings: Record<string, string> | undefined,
): Record<string, ResourceHandle> | undefined {
  if (!bindings || Object.keys(bindings).length === 0) {
    return undefined;
  }
  const handles: Record<string, ResourceHandle> = {};
  for (const [childResource, handle] of Object.entries(resourcesOf(draft, bindings))) {
    handles[childResource] = { ...handle, owner: handle.owner ?? draft.record.run_id };
  }
  return handles;
}
