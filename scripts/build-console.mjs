#!/usr/bin/env node
/**
 * Bundles the web console (console/src/main.tsx, Preact + TSX) into
 * console/public/build/app.js with esbuild, for Workers static assets
 * (docs/architecture.md#the-web-console).
 *
 * wrangler runs it before `wrangler dev` (so `npm run dev` and the e2e suite)
 * and before `wrangler deploy` (wrangler.toml `[build]`); it takes well under a
 * second. `--watch` rebuilds on change. The bundle is git-ignored: a fresh
 * clone builds it on its first `npm run dev`.
 */
import * as esbuild from "esbuild";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(fileURLToPath(new URL(".", import.meta.url)), "..");

/** @type {import("esbuild").BuildOptions} */
export const options = {
  entryPoints: [join(root, "console", "src", "main.tsx")],
  outfile: join(root, "console", "public", "build", "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  jsx: "automatic",
  jsxImportSource: "preact",
  minify: true,
  sourcemap: "linked",
  legalComments: "linked",
  logLevel: "warning",
};

if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
  process.stderr.write("[build-console] watching console/src\n");
} else {
  const started = Date.now();
  const result = await esbuild.build({ ...options, metafile: true });
  const [, app] = Object.entries(result.metafile.outputs).find(([path]) => path.endsWith("app.js")) ?? [];
  process.stderr.write(
    `[build-console] console/public/build/app.js: ${Math.round((app?.bytes ?? 0) / 1024)} KiB in ${Date.now() - started} ms\n`,
  );
}
