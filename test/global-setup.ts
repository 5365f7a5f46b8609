import { generateKeyPairSync } from "node:crypto";
import type { TestProject } from "vitest/node";
import { startHttpTarget } from "../scripts/lib/http-target.mjs";

declare module "vitest" {
  export interface ProvidedContext {
    journalSigningKey: string;
    httpTargetUrl: string;
  }
}

/** Starts the local peers once for the whole run and hands their addresses to the Worker. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { privateKey } = generateKeyPairSync("ed25519");
  project.provide("journalSigningKey", privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"));
  const target = await startHttpTarget({ port: 0 });
  project.provide("httpTargetUrl", target.url);
  return async () => {
    await target.close();
  };
}
