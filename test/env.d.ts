/// <reference path="../node_modules/@cloudflare/vitest-plugin/types/cloudflare-test.d.ts" />
/** Types the test Worker's `exports` after the real module (as `wrangler types` would). */
declare namespace Cloudflare {
  interface GlobalProps {
    mainModule: typeof import("../src/index.ts");
  }
}

/** Test-only bindings (vitest.config.ts). */
declare namespace Cloudflare {
  interface Env {
    /** The run index's migrations (migrations/), applied by test/workers/setup.ts. */
    TEST_MIGRATIONS?: import("cloudflare:test").D1Migration[];
    /** The example caller Worker (examples/caller), bound in vitest.config.ts (optional: the Worker's own Env lacks it). */
    CALLER?: Fetcher;
    /** A producer to the events queue (vitest.config.ts): what another Worker would send to it. */
    EVENTS_QUEUE?: Queue<unknown>;
  }
}

/** A file imported as its text (Vite's `?raw`): the examples tests read examples/ this way. */
declare module "*?raw" {
  const text: string;
  export default text;
}
