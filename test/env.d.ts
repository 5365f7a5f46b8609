/// <reference path="../node_modules/@cloudflare/vitest-plugin/types/cloudflare-test.d.ts" />
/** Types the test Worker's `exports` after the real module (as `wrangler types` would). */
declare namespace Cloudflare {
  interface GlobalProps {
    mainModule: typeof import("../src/index.ts");
  }
}

declare namespace Cloudflare {
  interface Env {
    /** The example caller Worker (examples/caller), bound in vitest.config.ts (optional: the Worker's own Env lacks it). */
    CALLER?: Fetcher;
  }
}
