import { bytesToText, textToBytes } from "../../lib/bytes.ts";
import { EngineError } from "../../lib/errors.ts";
import type { ToolOutput } from "../../schemas/tools.ts";
import type { Tool } from "./types.ts";

/**
 * Artifacts live in R2 under `runs/<run_id>/artifacts/<name>`, apart from
 * any container, so they outlive the container and the run. Each object
 * carries `customMetadata` { run_id, node_id, task_id, name, created_at, and
 * parent_run_id when the writing run is a child run } and its content type.
 * Writing a name again replaces the artifact.
 *
 * Who reads what: a run reads its own artifacts, its parent's (the payload's
 * `parent_run_id`) and its children's (objects whose `parent_run_id` is this
 * run). Any other run's artifacts read as missing (`tool.artifact_not_found`,
 * the same answer whether the artifact exists or not) and list as nothing.
 */
export function artifactKey(runId: string, name: string): string {
  return `runs/${runId}/artifacts/${name}`;
}

/** Largest artifact written through the tool: 32 MiB. */
export const MAX_ARTIFACT_BYTES = 32 * 1024 * 1024;
/** What read_artifact returns when the input sets no `max_bytes`: contexts travel and are stored. */
export const DEFAULT_ARTIFACT_READ_BYTES = 1024 * 1024;

type ArtifactInfo = ToolOutput<"list_artifacts">["artifacts"][number];

function toInfo(object: R2Object, runId: string, name: string): ArtifactInfo {
  return {
    name,
    key: object.key,
    run_id: object.customMetadata?.run_id ?? runId,
    size: object.size,
    content_type: object.httpMetadata?.contentType ?? "application/octet-stream",
    created_at: object.customMetadata?.created_at ?? object.uploaded.toISOString(),
  };
}

export const writeArtifactTool: Tool<"write_artifact"> = {
  async run(input, context) {
    const payload = context.action.payload;
    let bytes: Uint8Array;
    let encoding = input.encoding ?? "utf8";
    if (input.path !== undefined) {
      const file = await context
        .sandbox()
        .readFile({ path: input.path, encoding: "base64", max_bytes: MAX_ARTIFACT_BYTES });
      if (file.truncated) {
        throw EngineError.terminal(
          "tool.artifact_too_large",
          `${input.path} has ${file.size} bytes; artifacts are limited to ${MAX_ARTIFACT_BYTES}`,
        );
      }
      bytes = textToBytes(file.content, "base64");
      encoding = "base64";
    } else {
      bytes = textToBytes(input.content ?? "", encoding);
    }
    if (bytes.byteLength > MAX_ARTIFACT_BYTES) {
      throw EngineError.terminal(
        "tool.artifact_too_large",
        `the artifact has ${bytes.byteLength} bytes; the limit is ${MAX_ARTIFACT_BYTES}`,
      );
    }
    const contentType =
      input.content_type ?? (encoding === "utf8" ? "text/plain; charset=utf-8" : "application/octet-stream");
    const createdAt = new Date().toISOString();
    const object = await context.artifacts().put(artifactKey(payload.workflow_run_id, input.name), bytes, {
      httpMetadata: { contentType },
      customMetadata: {
        run_id: payload.workflow_run_id,
        node_id: payload.node_id,
        task_id: payload.task_id,
        name: input.name,
        created_at: createdAt,
        ...(payload.parent_run_id === undefined ? {} : { parent_run_id: payload.parent_run_id }),
      },
    });
    return toInfo(object, payload.workflow_run_id, input.name);
  },
};

/** Whether every artifact of `runId` is readable by the task's run: it is that run or its parent. */
function isOwnOrParent(
  runId: string,
  payload: { workflow_run_id: string; parent_run_id?: string | undefined },
): boolean {
  return runId === payload.workflow_run_id || runId === payload.parent_run_id;
}

/** Whether an object was written by a child of `runId`. */
function isWrittenByChildOf(object: R2Object, runId: string): boolean {
  return object.customMetadata?.parent_run_id === runId;
}

export const readArtifactTool: Tool<"read_artifact"> = {
  async run(input, context) {
    const payload = context.action.payload;
    const runId = input.run_id ?? payload.workflow_run_id;
    const maxBytes = input.max_bytes ?? DEFAULT_ARTIFACT_READ_BYTES;
    const object = await context.artifacts().get(artifactKey(runId, input.name));
    if (object === null || !(isOwnOrParent(runId, payload) || isWrittenByChildOf(object, payload.workflow_run_id))) {
      await object?.body.cancel();
      const whose = isOwnOrParent(runId, payload)
        ? ""
        : " that this run may read (a run reads its own artifacts, its parent's and its children's)";
      throw EngineError.terminal("tool.artifact_not_found", `run ${runId} has no artifact "${input.name}"${whose}`);
    }
    const data = await readUpTo(object.body, maxBytes);
    const encoding = input.encoding ?? "utf8";
    return {
      ...toInfo(object, runId, input.name),
      content: bytesToText(data, encoding),
      encoding,
      truncated: object.size > data.byteLength,
    };
  },
};

/** The first `limit` bytes of a stream; the rest is never read. (A ranged R2 get refuses empty objects.) */
async function readUpTo(stream: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  while (length < limit) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    const take = value.subarray(0, limit - length);
    chunks.push(take);
    length += take.length;
  }
  await reader.cancel();
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** Lists what the task's run may read of `run_id`'s artifacts: all of its own run's and its parent's, what its children wrote. */
export const listArtifactsTool: Tool<"list_artifacts"> = {
  async run(input, context) {
    const payload = context.action.payload;
    const runId = input.run_id ?? payload.workflow_run_id;
    const base = artifactKey(runId, "");
    const listed = await context.artifacts().list({
      prefix: `${base}${input.prefix ?? ""}`,
      limit: input.limit ?? 100,
      include: ["httpMetadata", "customMetadata"],
    });
    const readable = isOwnOrParent(runId, payload)
      ? listed.objects
      : listed.objects.filter((object) => isWrittenByChildOf(object, payload.workflow_run_id));
    return {
      artifacts: readable.map((object) => toInfo(object, runId, object.key.slice(base.length))),
      truncated: listed.truncated,
    };
  },
};
