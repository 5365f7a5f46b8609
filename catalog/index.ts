/** The definition catalog: what other folders may use. */
export { Catalog } from "./catalog.ts";
export { findCycle } from "./check-workflows.ts";
