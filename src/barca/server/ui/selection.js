// Which keys a "Recompute" of a partitioned node runs again: all of them, its failed keys, or
// the keys a search finds; the request that asks for them (`POST /runs` with `refresh`, and
// `partition` naming the chosen keys' values) and the count its dry run answers, which the
// page shows on the button before anything starts. Pure: no DOM (tests/browser/ui/).

import { plural } from "./format.js";

// a request's `partition` is at most 64 KiB of JSON (server/run_request.py): room is kept
// for the field's name and the rest of the body
export const MAX_SELECTION_BYTES = 60 * 1024;

/** A key's label (`retailer=r1`, `day=d1,region=emea`) as [[dim, value], ...]; a value may
 * hold "," or "=": a piece that does not start with `name=` belongs to the value before. */
export function parseKey(label) {
  const out = [];
  for (const piece of String(label).split(",")) {
    const m = /^([A-Za-z_]\w*)=(.*)$/s.exec(piece);
    if (m && !(out.length && out.some(([d]) => d === m[1]))) out.push([m[1], m[2]]);
    else if (out.length) out[out.length - 1][1] += `,${piece}`;
    else return null;
  }
  return out;
}

/** The `partition` selection naming `labels`: {selection: {dim: [values]}, keys: how many
 * keys it names (a selection is per dimension: several dimensions choose every
 * combination of the values, which may be more keys than were chosen)}. null for no key. */
export function selectionOf(labels) {
  const dims = new Map();
  for (const label of labels) {
    const pairs = parseKey(label);
    if (!pairs) return null;
    for (const [dim, value] of pairs) {
      if (!dims.has(dim)) dims.set(dim, new Set());
      dims.get(dim).add(value);
    }
  }
  if (!dims.size) return null;
  const selection = Object.fromEntries([...dims].map(([d, v]) => [d, [...v]]));
  const keys = Object.values(selection).reduce((n, v) => n * v.length, 1);
  return { selection, keys };
}

/** Whether a selection fits in one request. */
export function fits(selection) {
  return new TextEncoder().encode(JSON.stringify(selection)).length <= MAX_SELECTION_BYTES;
}

/** The body of `POST /runs` recomputing `node` (an asset or sensor: `get` with `refresh`),
 * narrowed to `selection` when given; a dry run when `dryRun`. */
export function recomputeRequest(nodeId, selection = null, dryRun = false) {
  const body = { command: "get", targets: [nodeId], refresh: [nodeId] };
  if (selection) body.partition = selection;
  if (dryRun) body.dry_run = true;
  return body;
}

/** What a dry run of the recompute says will run: {keys: the node's keys, others: steps of
 * other nodes (upstream ones that are stale)}. */
export function countOf(dryRun, nodeId) {
  const steps = (dryRun && dryRun.steps) || [];
  const own = steps.find((s) => s.id === nodeId);
  const keys = own ? (own.partitions ? own.partitions.will_run : own.action === "run" ? 1 : 0) : 0;
  const total = dryRun && dryRun.summary ? dryRun.summary.will_run || 0 : keys;
  return { keys, others: Math.max(0, total - keys) };
}

/** The confirm button's words once counted: "Recompute 200,000 keys" (and the other steps
 * the run takes with them). */
export function confirmText({ keys, others }) {
  const more = others ? ` (+${plural(others, "step")} upstream)` : "";
  return `Recompute ${plural(keys, "key")}${more}`;
}
