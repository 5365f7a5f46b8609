// A limit and its status in words (lib/limit-text.ts), as the console's Limits page and `trellis limits` print them.
import { describe, expect, test } from "vitest";
import { budgetsText, inUseText, keyText, periodText, windowsOf, windowText } from "../../lib/limit-text.ts";

const window = (used: number, resets_at: string | null) => ({ used, resets_at });

describe("periodText", () => {
  test("says a period exactly, in its largest units", () => {
    expect(periodText(60_000)).toBe("1m");
    expect(periodText(90_000)).toBe("1m 30s");
    expect(periodText(3_600_000)).toBe("1h");
    expect(periodText(86_400_000)).toBe("1d");
    expect(periodText(1_500)).toBe("1s 500ms");
    expect(periodText(250)).toBe("250ms");
    expect(periodText(86_400_000 + 3_600_000 + 1)).toBe("1d 1h 1ms");
    expect(periodText(0)).toBe("0ms");
  });
});

describe("budgetsText", () => {
  test("lists the budgets the definition has, in the order it declares them", () => {
    expect(budgetsText({ concurrency: 2 })).toBe("concurrency 2");
    expect(budgetsText({ rate: { limit: 10, period_ms: 60_000 } })).toBe("rate 10 per 1m");
    expect(
      budgetsText({
        concurrency: 1,
        rate: { limit: 5, period_ms: 1_000 },
        tokens: { limit: 50_000, period_ms: 3_600_000 },
      }),
    ).toBe("concurrency 1 · rate 5 per 1s · tokens 50000 per 1h");
  });
});

describe("inUseText", () => {
  test("counts held slots against concurrency, or alone without it", () => {
    expect(inUseText({ in_use: 1 }, { concurrency: 2 })).toBe("1/2");
    expect(inUseText({ in_use: 3 }, { rate: { limit: 5, period_ms: 1_000 } })).toBe("3");
  });
});

describe("windowsOf", () => {
  const rate = { limit: 10, period_ms: 60_000 };
  const tokens = { limit: 50_000, period_ms: 3_600_000 };

  test("a rate limit's window is the status's window", () => {
    const windows = windowsOf({ window: window(3, "2026-03-02T10:00:00.000Z") }, { rate });
    expect(windows).toEqual([
      { name: "rate", used: 3, limit: 10, period_ms: 60_000, resets_at: "2026-03-02T10:00:00.000Z" },
    ]);
    expect(windows.map(windowText)).toEqual(["rate 3/10 per 1m"]);
  });

  test("with rate and tokens, the window is the tokens' and rate_window the rate's, rate listed first", () => {
    const windows = windowsOf(
      { window: window(1_200, "2026-03-02T11:00:00.000Z"), rate_window: window(4, null) },
      { rate, tokens },
    );
    expect(windows.map(windowText)).toEqual(["rate 4/10 per 1m", "tokens 1200/50000 per 1h"]);
    expect(windows.map((w) => w.resets_at)).toEqual([null, "2026-03-02T11:00:00.000Z"]);
  });

  test("a tokens-only limit has its tokens window; a concurrency-only limit none", () => {
    expect(windowsOf({ window: window(7, null) }, { tokens }).map(windowText)).toEqual(["tokens 7/50000 per 1h"]);
    expect(windowsOf({ window: window(0, null) }, { concurrency: 1 })).toEqual([]);
  });
});

describe("keyText", () => {
  test("quotes a key, so the empty key reads as one", () => {
    expect(keyText("")).toBe('""');
    expect(keyText("acme")).toBe('"acme"');
  });
});
