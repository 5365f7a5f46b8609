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
  }
}
