import { describe, it } from "vitest";
import { WAIT_KINDS, type WaitKind, type WaitKindRow } from "../../coordinator/wait-kinds.ts";

describe("the table of wait kinds", () => {
  it("has one complete row per kind: a table or a row that misses a place does not compile", ({ expect }) => {
    // @ts-expect-error a table without the timer row does not compile
    const missingRow: { readonly [K in WaitKind]: WaitKindRow<K> } = { gate: WAIT_KINDS.gate, child: WAIT_KINDS.child };
    // @ts-expect-error a row that says nothing of closing does not compile
    const missingPlace: WaitKindRow<"timer"> = { ...WAIT_KINDS.timer, close: undefined };
    expect([missingRow, missingPlace]).toHaveLength(2);
    expect(Object.keys(WAIT_KINDS)).toEqual(["gate", "child", "timer", "event", "tools", "limit"]);
  });
});
