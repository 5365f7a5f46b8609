import { describe, it } from "vitest";
import { CliError, type Api, type RequestOptions } from "../../cli/api.ts";
import { sendEventCommand, type Io } from "../../cli/commands.ts";

/** `trellis events send` against a recording stand-in for the API (docs/cli.md). */

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
