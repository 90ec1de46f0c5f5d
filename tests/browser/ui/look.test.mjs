// look.js: a node's tone and label from its status entry and what runs now.
import test from "node:test";
import assert from "node:assert/strict";

import { nodeLook, runTone } from "../../../src/barca/server/ui/look.js";

const asset = { id: "p.py:a", kind: "asset" };
const parts = (shares, extra = {}) => ({ total: 300, shares, ...extra });

test("a node at work in a run is running, whatever its colour before", () => {
  const entry = { cache: { state: "partial" }, partitions: parts({ cached: 299, stale: 0, failed: 1, blocked: 0 }) };
  assert.equal(nodeLook(asset, entry, { active: true, failed: 0 }).tone, "running");
  assert.equal(nodeLook(asset, entry, { active: false, failed: 0 }).tone, "failed");
  assert.equal(nodeLook(asset, entry, { active: true, failed: 2 }).label, "Running · 2 failed");
});

test("partial and blocked counts", () => {
  const failed = { cache: { state: "partial" }, partitions: parts({ cached: 297, stale: 1, failed: 1, blocked: 1 }) };
  assert.deepEqual(nodeLook(asset, failed), { tone: "failed", label: "1 failed · 1 blocked · 1 stale" });
  const stale = { cache: { state: "partial" }, partitions: parts({ cached: 100, stale: 200, failed: 0, blocked: 0 }) };
  assert.deepEqual(nodeLook(asset, stale), { tone: "stale", label: "Partial · 200 to run" });
  const one = { cache: { state: "blocked" }, partitions: parts({ cached: 0, stale: 0, failed: 0, blocked: 1 }) };
  assert.equal(nodeLook(asset, one).label, "Blocked · 1 key");
  const many = { cache: { state: "blocked" }, partitions: parts({ cached: 0, stale: 0, failed: 0, blocked: 20_000 }) };
  assert.equal(nodeLook(asset, many).label, "Blocked · 20,000 keys");
});

test("no status yet, and statuses without keys", () => {
  assert.equal(nodeLook(asset, null, null, true).tone, "loading");
  assert.equal(nodeLook(asset, null, null, false).tone, "unknown");
  assert.deepEqual(nodeLook(asset, { cache: { state: "cached" } }), { tone: "ok", label: "Cached" });
  assert.equal(nodeLook(asset, { cache: { state: "stale", reason: "artifact_missing" } }).label, "Stale · result missing");
  assert.equal(nodeLook({ kind: "sensor" }, { cache: { state: "always_runs" } }).label, "Observed on every run");
});

test("a run's status word as a tone", () => {
  assert.equal(runTone("success"), "ok");
  assert.equal(runTone("failed"), "failed");
  assert.equal(runTone("running"), "running");
  assert.equal(runTone("something else"), "never");
});
