// format.js: how numbers, shares, durations, moments and reason codes read.
import test from "node:test";
import assert from "node:assert/strict";

import { fmtPct, plural, fmtDur, fmtAgo, fmtInt, fmtCompact, splitId, stepKey, reasonText } from "../../../src/barca/server/ui/format.js";

test("a share one key short of all is never 100%", () => {
  assert.equal(fmtPct(299, 300), "99.7%");
  assert.equal(fmtPct(1, 300), "0.3%");
  assert.equal(fmtPct(199_999, 200_000), ">99.9%");
  assert.equal(fmtPct(1, 200_000), "<0.1%");
  for (const total of [3, 7, 300, 1001, 200_000]) {
    for (const part of [1, total - 1]) {
      assert.notEqual(fmtPct(part, total), "100%", `${part} of ${total}`);
      assert.notEqual(fmtPct(part, total), "0%", `${part} of ${total}`);
    }
  }
});

test("whole shares read without a decimal", () => {
  assert.equal(fmtPct(300, 300), "100%");
  assert.equal(fmtPct(0, 300), "0%");
  assert.equal(fmtPct(150, 300), "50%");
  assert.equal(fmtPct(1, 3), "33.3%");
  assert.equal(fmtPct(5, 0), "—");
});

test("one key, two keys", () => {
  assert.equal(plural(1, "key"), "1 key");
  assert.equal(plural(0, "key"), "0 keys");
  assert.equal(plural(20_000, "key"), "20,000 keys");
  assert.equal(plural(1, "step"), "1 step");
  assert.equal(plural(2, "entry", "entries"), "2 entries");
});

test("numbers and durations", () => {
  assert.equal(fmtInt(1234567), "1,234,567");
  assert.equal(fmtInt(null), "—");
  assert.equal(fmtCompact(9999), "9,999");
  assert.equal(fmtCompact(200_000), "200K");
  assert.equal(fmtDur(0.0004), "<1 ms");
  assert.equal(fmtDur(0.25), "250 ms");
  assert.equal(fmtDur(3.14159), "3.14 s");
  assert.equal(fmtDur(42.25), "42.3 s");
  assert.equal(fmtDur(125), "2m 05s");
  assert.equal(fmtDur(3 * 3600 + 7 * 60), "3h 07m");
  assert.equal(fmtDur(null), "—");
});

test("moments relative to now, in the past and the future", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  assert.equal(fmtAgo("2026-01-01T11:59:58Z", now), "just now");
  assert.equal(fmtAgo("2026-01-01T11:59:30Z", now), "30s ago");
  assert.equal(fmtAgo("2026-01-01T11:50:00Z", now), "10 min ago");
  assert.equal(fmtAgo("2026-01-01T15:00:00Z", now), "in 3 h");
  assert.equal(fmtAgo("not a time", now), "—");
});

test("ids and step ids", () => {
  assert.deepEqual(splitId("etl/pipeline.py:orders"), { file: "etl/pipeline.py", name: "orders" });
  assert.deepEqual(splitId("orders"), { file: "", name: "orders" });
  assert.equal(stepKey("pipeline.py:orders[retailer=r1]"), "retailer=r1");
  assert.equal(stepKey("pipeline.py:orders"), "");
});

test("reason codes read as words, never as codes", () => {
  for (const code of ["materialized", "no_record", "changed", "failed", "artifact_missing",
    "refresh", "refresh_cascade", "partitions_missing", "blocked", "upstream_unknown",
    "partition_selection", "sensor_output_unknown", "partitions_unknown"]) {
    const words = reasonText(code);
    assert.ok(words && !words.includes("_"), `${code}: ${words}`);
    assert.notEqual(words, code);
  }
  assert.equal(reasonText("artifact_missing"), "its stored result is missing");
  assert.equal(reasonText("some_new_code"), "some new code");
  assert.equal(reasonText(null), "");
});
