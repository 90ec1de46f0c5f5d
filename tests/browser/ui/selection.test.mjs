// selection.js: the keys a Recompute names, the request, and the count its dry run gives.
import test from "node:test";
import assert from "node:assert/strict";

import { parseKey, selectionOf, fits, recomputeRequest, countOf, confirmText, MAX_SELECTION_BYTES }
  from "../../../src/barca/server/ui/selection.js";

test("a key's label as its dimensions' values", () => {
  assert.deepEqual(parseKey("retailer=r1"), [["retailer", "r1"]]);
  assert.deepEqual(parseKey("day=d1,region=emea"), [["day", "d1"], ["region", "emea"]]);
  assert.deepEqual(parseKey("name=a,b=c"), [["name", "a"], ["b", "c"]]);
  assert.deepEqual(parseKey("city=Paris, France"), [["city", "Paris, France"]]);
  assert.equal(parseKey("no dimension"), null);
});

test("the selection of some keys, and how many keys it names", () => {
  assert.deepEqual(selectionOf(["retailer=r150", "retailer=r151", "retailer=r150"]),
    { selection: { retailer: ["r150", "r151"] }, keys: 2 });
  // several dimensions choose every combination: 2 keys chosen, 4 named
  assert.deepEqual(selectionOf(["day=d1,region=amer", "day=d2,region=emea"]),
    { selection: { day: ["d1", "d2"], region: ["amer", "emea"] }, keys: 4 });
  assert.equal(selectionOf([]), null);
  assert.equal(selectionOf(["oops"]), null);
});

test("a selection fits one request up to the server's limit", () => {
  const keys = (n) => ({ retailer: Array.from({ length: n }, (_, i) => `r${String(i).padStart(6, "0")}`) });
  assert.ok(fits(keys(1000)));
  assert.ok(!fits(keys(10_000)));
  assert.ok(JSON.stringify(keys(10_000)).length > MAX_SELECTION_BYTES);
});

test("the request: a get that refreshes the node, narrowed, dry or not", () => {
  assert.deepEqual(recomputeRequest("p.py:orders"), { command: "get", targets: ["p.py:orders"], refresh: ["p.py:orders"] });
  assert.deepEqual(recomputeRequest("p.py:orders", { retailer: ["r1"] }, true),
    { command: "get", targets: ["p.py:orders"], refresh: ["p.py:orders"], partition: { retailer: ["r1"] }, dry_run: true });
});

test("the count a dry run gives, and the button's words", () => {
  const dry = {
    steps: [
      { id: "p.py:config", action: "run" },
      { id: "p.py:orders", action: "run", partitions: { total: 200000, will_run: 200000 } },
    ],
    summary: { will_run: 200001, cached: 0 },
  };
  assert.deepEqual(countOf(dry, "p.py:orders"), { keys: 200000, others: 1 });
  assert.equal(confirmText(countOf(dry, "p.py:orders")), "Recompute 200,000 keys (+1 step upstream)");
  assert.equal(confirmText({ keys: 1, others: 0 }), "Recompute 1 key");
  assert.deepEqual(countOf({ steps: [], summary: { will_run: 0 } }, "p.py:orders"), { keys: 0, others: 0 });
});
