import { describe, expect, it } from "vitest";
import { byBinary, parsePerfReport } from "../../scripts/lib/perf-record.mjs";

describe("parsePerfReport (npm run bench -- --perf)", () => {
  it("reads the percent under each symbol with --children, dropping [.] and [k]", () => {
    const raw = [
      "# Children      Self  Symbol",
      "# ........  ........  ......",
      "#",
      "    16.93%     0.09%  [.] JS:+'signCommitSend index.js:83534:23",
      "     9.45%     0.02%  [k] do_fsync",
      "",
    ].join("\n");
    expect(parsePerfReport(raw)).toEqual([
      { percent: 16.93, count: undefined, name: "JS:+'signCommitSend index.js:83534:23" },
      { percent: 9.45, count: undefined, name: "do_fsync" },
    ]);
  });

  it("reads the sample count of each binary with -n", () => {
    const raw = [
      "# Overhead  Samples  Shared Object",
      "    73.26%     4194  workerd",
      "     5.21%      298  [JIT] tid 12879",
    ].join("\n");
    expect(parsePerfReport(raw)).toEqual([
      { percent: 73.26, count: 4194, name: "workerd" },
      { percent: 5.21, count: 298, name: "[JIT] tid 12879" },
    ]);
  });

  it("sums V8's generated code, one jitted .so per piece after perf inject --jit, into one row", () => {
    const rows = parsePerfReport(
      [
        "    70.00%     700  workerd",
        "     3.00%      30  jitted-812-17.so",
        "    12.00%     120  [kernel.kallsyms]",
        "     2.50%      25  jitted-812-9052.so",
      ].join("\n"),
    );
    expect(byBinary(rows)).toEqual([
      { percent: 70, count: 700, name: "workerd" },
      { percent: 12, count: 120, name: "[kernel.kallsyms]" },
      { percent: 5.5, count: 55, name: "[JIT] V8's generated code" },
    ]);
  });
});
