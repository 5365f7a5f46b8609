/**
 * The most a response body read by an SDK may bring into the executor, in
 * bytes: the `llm` and `mcp` actions wrap their SDK's fetch with
 * {@link cappedFetch}. Past it the body stream errors, so a peer that answers
 * without end cannot fill the isolate's memory (128 MB, shared by the tasks
 * of a group). The `http` action reads its own bodies and stops earlier, at
 * 32 MiB, without a stream in between: wrapping every response measured 16 ms
 * slower on the 100-way fan-out (`npm run bench:ab`, 9 of 9 pairs).
 */
export const MAX_RESPONSE_BYTES = 40 * 1024 * 1024;

/** Statuses whose responses have no body (a Response with one cannot be built). */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** `fetch` whose response bodies error once they pass `maxBytes`. */
export function cappedFetch(inner: typeof fetch, maxBytes: number = MAX_RESPONSE_BYTES): typeof fetch {
  return async (input, init) => {
    const response = await inner(input, init);
    if (response.body === null || NULL_BODY_STATUSES.has(response.status)) {
      return response;
    }
    let received = 0;
    const limit = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        received += chunk.byteLength;
        if (received > maxBytes) {
          controller.error(new RangeError(`the response body is larger than ${maxBytes} bytes (the executor's limit)`));
          return;
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(limit), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}
