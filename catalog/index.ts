/** The definition catalog: what other folders may use. */
export { Catalog } from "./catalog.ts";
export { findCycle } from "./check-workflows.ts";
export { resolveSnapshot, resolveSnapshotResult } from "./snapshots.ts";
export { decodeCursor, type ListPage } from "./listing.ts";
