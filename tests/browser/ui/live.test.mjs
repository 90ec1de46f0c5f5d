// live.js: a run's progress folded from its events, and which nodes are at work.
import test from "node:test";
import assert from "node:assert/strict";

import { RunProgress, activityByNode } from "../../../src/barca/server/ui/live.js";

const step = (node, key, ok, done, extra = {}) => ({
  type: "step_finished", node_id: node, step_id: `${node}[k=${key}]`, ok, done, total: 4,
  elapsed_seconds: 0.5, ...extra,
});

test("steps count, failures group by the server's error group", () => {
  const run = new RunProgress("r1", 0);
  assert.equal(run.apply({ type: "run_started", total: 4 }, 1), false);
  run.apply(step("p:a", 1, true, 1), 2);
  run.apply(step("p:a", 2, false, 2, { error_group: "feed {key} down", error: "feed 2 down" }), 3);
  run.apply(step("p:a", 3, false, 3, { error_group: "feed {key} down", error: "feed 3 down" }), 4);
  run.apply(step("p:a", 4, true, 4), 5);
  assert.equal(run.done, 4);
  assert.equal(run.total, 4);
  assert.equal(run.stepsFailed, 2);
  assert.deepEqual([...run.failures.values()], [{ error: "feed {key} down", count: 2, node_id: "p:a",
    sample_steps: ["p:a[k=2]", "p:a[k=3]"] }]);
  assert.deepEqual(run.perNode.get("p:a"), { ok: 2, failed: 2, elapsed: 2, last: 5 });
  assert.equal(run.lines.filter((l) => l.kind === "error").length, 2);
});

test("phases add up; the end is run_finished", () => {
  const run = new RunProgress("r1", 0);
  run.apply({ type: "run_started", total: 2 });
  run.apply(step("p:a", 1, true, 2, { total: 2 }));
  run.apply({ type: "run_started", total: 3 });
  run.apply(step("p:b", 1, true, 1, { total: 3 }));
  assert.equal(run.done, 3);
  assert.equal(run.total, 5);
  const end = { type: "run_finished", run_status: "success", ok: true };
  assert.equal(run.apply(end), true);
  run.end(end, 10);
  assert.equal(run.status, "success");
  assert.equal(run.closed, true);
  assert.equal(run.finishedAt, 10);
});

test("a run this server does not follow ends as external, its status kept", () => {
  const run = new RunProgress("r1", 0);
  run.end({ type: "run_finished", status: "running" });
  assert.equal(run.external, true);
  assert.equal(run.status, "pending");
  assert.equal(run.finishedAt, null);
});

test("the log keeps its last lines", () => {
  const run = new RunProgress("r1");
  for (let i = 0; i < 2100; i++) run.apply({ type: "log", text: `line ${i}`, stream: "stdout", step_id: "p:a" });
  assert.equal(run.lines.length, 2000);
  assert.equal(run.dropped, 100);
  assert.equal(run.lines[0].text, "line 100");
});

test("a node with keys in the workers stays at work, however long a key takes", () => {
  const run = new RunProgress("r1", 0);
  run.apply({ type: "run_started", total: 12 }, 0);
  run.apply({ type: "steps_submitted", node_id: "p:slow", keys: 12, calls: 12 }, 0);
  run.apply(step("p:slow", 1, true, 1), 1000);
  const state = new Map([["p:slow", { partitions: { missing: 12 } }]]);
  const memo = new Map();
  // a minute after its last step finished, 11 keys are still in the workers
  const act = activityByNode([run], state, memo, 61_000).get("p:slow");
  assert.deepEqual(act, { ok: 1, failed: 0, active: true, expected: 12 });
  // before any step of it finished, too
  const fresh = new RunProgress("r2", 0);
  fresh.apply({ type: "steps_submitted", node_id: "p:slow", keys: 12 }, 0);
  assert.equal(activityByNode([fresh], state, memo, 60_000).get("p:slow").active, true);
});

test("a node whose keys all finished rests; an ended run counts nothing", () => {
  const run = new RunProgress("r1", 0);
  run.apply({ type: "steps_submitted", node_id: "p:a", keys: 1 }, 0);
  run.apply(step("p:a", 1, true, 1), 1000);
  assert.equal(activityByNode([run], null, new Map(), 2000).get("p:a").active, true);
  assert.equal(activityByNode([run], null, new Map(), 7000).get("p:a").active, false);
  run.end({ type: "run_finished", run_status: "success" });
  assert.deepEqual(activityByNode([run], null, new Map(), 2000).get("p:a"), { ok: 0, failed: 0, active: false, expected: 0 });
});
