/**
 * Containers: the Sandbox Durable Object (one container per run and declared
 * resource) and the logic it runs, independent of the container runtime. The
 * shell server that runs inside each container is
 * `containers/shell-server/server.mjs` (plain Node, not imported by the Worker).
 */
export { Sandbox, SHELL_SERVER_PORT, DEFAULT_SLEEP_AFTER, createLocalTransport } from "./sandbox-container.ts";
export {
  SandboxCore,
  type OwnerRecord,
  type OwnerStore,
  type SandboxCoreDeps,
  type SandboxOperation,
  type ShellTransport,
} from "./sandbox-core.ts";
