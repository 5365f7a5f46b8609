import { describe, expect, it } from "vitest";
import { byBinary, devServerPositions, parsePerfReport, partsOf } from "../../scripts/lib/perf-record.mjs";

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

describe("partsOf (npm run bench -- --perf: the samples by part)", () => {
  /** One sample as `perf script -F comm,tid,time,ip,sym` prints it: a header, then its frames, leaf first. */
  const sample = (...frames: string[]) =>
    [
      "workerd 27435 78384.639350: ",
      ...frames.map((frame, at) => `\t         ${(0x4000 + at).toString(16)} ${frame}`),
    ].join("\n");

  it("gives each sample to its innermost part, and counts the engine's own code with all it calls", () => {
    const text = [
      sample("sqlite3VdbeExec", "workerd::SqliteDatabase::Query::nextRow", "JS:*save index.js:169776:15"),
      sample("Builtin:KeyedLoadIC_Megamorphic", "JS:*decide index.js:122529:16", "JS:+run index.js:166697:12"),
      sample("v8::internal::Heap::Scavenge", "v8::internal::Heap::CollectGarbage"),
      sample("workerd::api::Request::constructor", "JS:^fetch entry.worker.js:5303:14"),
      sample("<hyper::proto::h1::conn::Conn<I,B,T>>::poll_read_head", "kj::_::ChainPromiseNode::fire"),
      "",
    ].join("\n");
    const parts = partsOf(text, new Set());
    expect(parts.samples).toBe(5);
    expect(parts.own).toBe(40);
    expect(parts.rows).toEqual([
      { name: "SQLite (statements and commits)", percent: 20 },
      { name: "JavaScript: the engine's own", percent: 20 },
      { name: "V8 garbage collector", percent: 20 },
      { name: "JavaScript: the dev server's", percent: 20 },
      { name: "HTTP client", percent: 20 },
    ]);
  });

  it("gives frames of Miniflare's own index.js workers to the dev server, not to the engine", () => {
    // The outbound interceptor's module is named index.js too; V8 names a function by the position of its `(`.
    const interceptor = [
      "export default {",
      "  async fetch(request, env) {",
      "    return fetch(request);",
      "  }",
      "};",
    ];
    const devServer = devServerPositions([interceptor.join("\n")]);
    expect(devServer.has("fetch 2:14")).toBe(true);
    const text = [
      sample("workerd::api::Request::constructor", "JS:~fetch index.js:2:14"),
      sample("workerd::api::Request::constructor", "JS:^fetch index.js:166668:36"),
      "",
    ].join("\n");
    expect(partsOf(text, devServer)).toEqual({
      samples: 2,
      own: 50,
      rows: [
        { name: "JavaScript: the dev server's", percent: 50 },
        { name: "JavaScript: the engine's own", percent: 50 },
      ],
    });
  });

  it("reads an empty recording as no samples", () => {
    expect(partsOf("", new Set())).toEqual({ samples: 0, own: 0, rows: [] });
  });
});
