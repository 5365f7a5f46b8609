import { describe, it } from "vitest";
import { CliError, type Api, type RequestOptions } from "../../cli/api.ts";
import { sendEventCommand, signalCommand, type Io } from "../../cli/commands.ts";

/** `trellis events send` and `trellis signal` against a recording stand-in for the API (docs/cli.md). */

function recording(answer: unknown): { io: Io; bodies: unknown[]; paths: string[]; printed: () => string } {
  const bodies: unknown[] = [];
  const paths: string[] = [];
  let printed = "";
  const api = {
    json: (method: string, path: string, options: RequestOptions = {}) => {
      paths.push(`${method} ${path}`);
      bodies.push(options.body);
      return Promise.resolve(answer);
    },
  } as unknown as Api;
  const out = { write: (text: string) => ((printed += text), true), isTTY: false } as unknown as NodeJS.WriteStream;
  return { io: { api, json: false, out }, bodies, paths, printed: () => printed };
}

describe("trellis events send", () => {
  it("posts one event with its data and id, and prints what became of it", async ({ expect }) => {
    const { io, bodies, paths, printed } = recording({ events: [{ event_id: "pay-42", duplicate: true }] });
    expect(await sendEventCommand(io, "order.paid", { data: '{"order":42}', id: "pay-42" })).toBe(0);
    expect(paths).toEqual(["POST /v1/events"]);
    expect(bodies).toEqual([{ name: "order.paid", data: { order: 42 }, id: "pay-42" }]);
    expect(printed()).toBe("pay-42  duplicate\n");
  });

  it("sends no data when none is given", async ({ expect }) => {
    const { io, bodies, printed } = recording({ events: [{ event_id: "evt_1", duplicate: false }] });
    await sendEventCommand(io, "tick", {});
    expect(bodies).toEqual([{ name: "tick" }]);
    expect(printed()).toBe("evt_1  accepted\n");
  });

  it("blames --data when it is neither JSON nor a file", async ({ expect }) => {
    const { io, paths } = recording(null);
    const refused = sendEventCommand(io, "tick", { data: "{order: 42}" });
    await expect(refused).rejects.toBeInstanceOf(CliError);
    await expect(refused).rejects.toThrow(/^--data is neither a JSON value nor a file/);
    expect(paths).toEqual([]);
  });
});

describe("trellis signal", () => {
  it("posts one signal to the run, with its data and id, and prints what became of it", async ({ expect }) => {
    const { io, bodies, paths, printed } = recording({ events: [{ event_id: "reply-7", duplicate: false }] });
    expect(await signalCommand(io, "run_1", "customer.replied", { data: '{"ticket_id":7}', id: "reply-7" })).toBe(0);
    expect(paths).toEqual(["POST /v1/runs/run_1/signals"]);
    expect(bodies).toEqual([{ name: "customer.replied", data: { ticket_id: 7 }, id: "reply-7" }]);
    expect(printed()).toBe("reply-7  accepted\n");
  });

  it("escapes the run id in the path and says duplicate when the run had that id already", async ({ expect }) => {
    const { io, bodies, paths, printed } = recording({ events: [{ event_id: "again", duplicate: true }] });
    await signalCommand(io, "run/../x", "tick", { id: "again" });
    expect(paths).toEqual(["POST /v1/runs/run%2F..%2Fx/signals"]);
    expect(bodies).toEqual([{ name: "tick", id: "again" }]);
    expect(printed()).toBe("again  duplicate\n");
  });

  it("prints the API's answer as JSON with --json", async ({ expect }) => {
    const answer = { events: [{ event_id: "evt_1", duplicate: false }] };
    const { io, printed } = recording(answer);
    await signalCommand({ ...io, json: true }, "run_1", "tick", {});
    expect(JSON.parse(printed())).toEqual(answer);
  });

  it("blames --data when it is neither JSON nor a file, and sends nothing", async ({ expect }) => {
    const { io, paths } = recording(null);
    const refused = signalCommand(io, "run_1", "tick", { data: "{ticket: 7}" });
    await expect(refused).rejects.toThrow(/^--data is neither a JSON value nor a file/);
    expect(paths).toEqual([]);
  });
});
