/**
 * A `node --import` preload that makes every TCP server of the process listen
 * on 127.0.0.1, whatever host it asks for (none, `0.0.0.0`, `::`). Used to run
 * third-party test peers that call `listen(PORT)` on all interfaces, such as
 * @modelcontextprotocol/server-everything, so that they are reachable from
 * this machine only. Unix-socket and handle forms of `listen` are left alone.
 */
import net from "node:net";

const originalListen = net.Server.prototype.listen;

/** @this {net.Server} @param {any[]} args */
function listenOnLoopback(...args) {
  const [first] = args;
  if (
    first !== null &&
    typeof first === "object" &&
    !Array.isArray(first) &&
    ("port" in first || !("path" in first || "fd" in first || "handle" in first))
  ) {
    args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] === "string") args[1] = "127.0.0.1";
    else args.splice(1, 0, "127.0.0.1");
  }
  return originalListen.apply(this, /** @type {any} */ (args));
}

net.Server.prototype.listen = /** @type {any} */ (listenOnLoopback);

// The peer ends with the process that started it, even one killed without a chance to stop it
// (a timeout's SIGKILL): once it is reparented, nothing else would ever stop it.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) {
    process.exit(0);
  }
}, 1_000).unref();
