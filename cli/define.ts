import { readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative } from "node:path";
import { parse } from "yaml";
import { DEFINITION_KINDS, type DefinitionKind } from "../schemas/definitions.ts";
import { CliError, type Api } from "./api.ts";

const EXTENSIONS = new Set([".yaml", ".yml", ".json"]);

/** Where each definition of the merged bundle came from: its file and its index there. */
interface Origin {
  file: string;
  index: number;
}

export interface Created {
  kind: DefinitionKind;
  id: string;
  version: number;
  existing: boolean;
}

/** The registration's answer: what was created or reused, and what looks wrong (paths in file terms). */
export interface Registered {
  created: Created[];
  warnings?: Detail[];
  /** Files found in a folder that hold no definitions (a plan, a tsconfig.json): left out of the bundle. */
  skipped?: string[];
}

/** A file to register: named on the command line, or found in a folder named there. */
export interface BundleFile {
  path: string;
  inFolder: boolean;
}

interface Detail {
  path: string;
  message: string;
}

/** The YAML and JSON files named, folders searched recursively, in a stable order. */
export function bundleFiles(paths: readonly string[]): BundleFile[] {
  return paths.flatMap((path): BundleFile[] => {
    if (!statSync(path, { throwIfNoEntry: false })) {
      throw new CliError("cli.not_found", `${path}: no such file or folder`);
    }
    if (!statSync(path).isDirectory()) {
      return [{ path, inFolder: false }];
    }
    return readdirSync(path, { recursive: true, encoding: "utf8" })
      .filter((name) => EXTENSIONS.has(extname(name)))
      .sort()
      .map((name) => ({ path: join(path, name), inFolder: true }));
  });
}

/**
 * Registers the files as one bundle, so a workflow may name a task defined in
 * another file, and the catalog stores them all or none. A problem's path is
 * told in terms of its own file (`flows/a.yaml: workflows.0.nodes.x`).
 */
export async function define(api: Api, files: readonly BundleFile[]): Promise<Registered> {
  const bundle: Partial<Record<DefinitionKind, unknown[]>> = {};
  const origins = new Map<string, Origin>();
  const skipped: string[] = [];
  for (const { path: file, inFolder } of files) {
    const document = readDocument(file);
    // A folder may hold other JSON and YAML (examples/ has plans and a tsconfig.json): only a named file must be a bundle.
    if (inFolder && !DEFINITION_KINDS.some((kind) => Object.hasOwn(document, kind))) {
      skipped.push(file);
      continue;
    }
    checkKeys(file, document);
    for (const kind of DEFINITION_KINDS) {
      const list = document[kind];
      if (list === undefined) {
        continue;
      }
      if (!Array.isArray(list)) {
        throw new CliError("cli.invalid_bundle", `${file}: ${kind} must be a list`);
      }
      const merged = (bundle[kind] ??= []);
      list.forEach((definition, index) => {
        origins.set(`${kind}.${merged.length}`, { file, index });
        merged.push(definition);
      });
    }
  }
  try {
    const answer = await api.json<Registered>("POST", "/v1/definitions", { body: bundle });
    return { ...answer, warnings: inFileTerms(answer.warnings ?? [], origins), skipped };
  } catch (thrown) {
    if (thrown instanceof CliError) {
      throw new CliError(thrown.code, thrown.message, thrown.status, inFileTerms(thrown.details, origins));
    }
    throw thrown;
  }
}

function readDocument(file: string): Record<string, unknown> {
  const text = readFileSync(file, "utf8");
  let document: unknown;
  try {
    document = extname(file) === ".json" ? JSON.parse(text) : parse(text, { maxAliasCount: 100 });
  } catch (thrown) {
    throw new CliError("cli.invalid_bundle", `${file}: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new CliError("cli.invalid_bundle", `${file}: a bundle is an object of lists (workflows, tasks, actions, …)`);
  }
  return document as Record<string, unknown>;
}

function checkKeys(file: string, document: Record<string, unknown>): void {
  const unknown = Object.keys(document).filter((key) => !(DEFINITION_KINDS as readonly string[]).includes(key));
  if (unknown.length > 0) {
    throw new CliError(
      "cli.invalid_bundle",
      `${file}: unknown key ${unknown.join(", ")} (expected ${DEFINITION_KINDS.join(", ")})`,
    );
  }
}

/** Details whose paths point into the merged bundle, pointing into their own files instead. */
function inFileTerms<D extends Detail>(details: readonly D[], origins: ReadonlyMap<string, Origin>): D[] {
  return details.map((detail) => {
    const [kind, index, ...rest] = detail.path.split(".");
    const origin = origins.get(`${kind}.${index}`);
    const path = origin ? `${relative(".", origin.file)}: ${[kind, origin.index, ...rest].join(".")}` : detail.path;
    return { ...detail, path };
  });
}
