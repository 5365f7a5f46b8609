/**
 * Workers AI and Vectorize exist only on Cloudflare's network. Under
 * `wrangler dev --local` (how `npm run dev` and the e2e suite run) their
 * bindings are present but every call throws "Binding AI needs to be run
 * remotely" (likewise for Vectorize). That message is the only signal the
 * local stub gives, so it is matched here, narrowly, to fail such calls as
 * `*.no_binding` (not retryable) instead of as infrastructure errors that a
 * retry policy would repeat in vain.
 */
const REMOTE_ONLY_MESSAGE = /\bneeds to be run remotely\b/;

/** Whether `thrown` (or an error it wraps) is the local stub of a remote-only binding refusing a call. */
export function isRemoteOnlyBindingError(thrown: unknown): boolean {
  for (let error = thrown, depth = 0; error instanceof Error && depth < 4; error = error.cause, depth++) {
    if (REMOTE_ONLY_MESSAGE.test(error.message)) {
      return true;
    }
  }
  return false;
}
