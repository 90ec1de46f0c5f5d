// How a node's status reads: a tone (its colour) and a short label, shared by the graph, the
// list and the node panel.

const NO_SHARES = { cached: 0, stale: 0, failed: 0, blocked: 0 };

/** The cached / stale / failed / blocked shares of a status entry's `partitions`, as the server
 * reconciled them (they add up to its `total`; stale: keys that will run for any other
 * reason, never-run keys included). */
export function sharesOf(p) {
  return (p && p.shares) || NO_SHARES;
}

const STALE_REASON = {
  changed: "Stale · code or inputs changed",
  artifact_missing: "Stale · result missing",
  failed: "Last run failed",
};

export const TONE_LABEL = {
  ok: "Cached", stale: "Stale / partial", failed: "Failed", blocked: "Blocked",
  never: "Never run", always: "Always runs", unknown: "Unknown", running: "Running",
};

export function nodeLook(asset, entry, act, loading) {
  if (act && act.active) {
    return { tone: "running", label: act.failed ? `Running · ${act.failed} failed` : "Running…" };
  }
  if (!entry) return loading ? { tone: "loading", label: "Loading status…" } : { tone: "unknown", label: "No status" };
  const cache = entry.cache || {};
  const c = sharesOf(entry.partitions);
  const n = (x) => x.toLocaleString("en-US");
  switch (cache.state) {
    case "cached":
      return { tone: "ok", label: "Cached" };
    case "partial":
      if (c.failed) return { tone: "failed", label: `${n(c.failed)} failed${c.blocked ? ` · ${n(c.blocked)} blocked` : ""}${c.stale ? ` · ${n(c.stale)} stale` : ""}` };
      if (c.blocked) return { tone: "blocked", label: `${n(c.blocked)} blocked${c.stale ? ` · ${n(c.stale)} stale` : ""}` };
      return { tone: "stale", label: `Partial · ${n(c.stale)} to run` };
    case "stale":
      if (cache.reason === "failed") return { tone: "failed", label: "Last run failed" };
      if (c.failed) return { tone: "failed", label: `Stale · ${n(c.failed)} failed` };
      if (String(cache.reason || "").startsWith("refresh")) return { tone: "stale", label: "Stale · refresh asked" };
      return { tone: "stale", label: STALE_REASON[cache.reason] || "Stale" };
    case "never_run":
      return { tone: "never", label: "Never run" };
    case "blocked":
      return { tone: "blocked", label: c.blocked ? `Blocked · ${n(c.blocked)} key${c.blocked === 1 ? "" : "s"}` : "Blocked by failed upstream" };
    case "unknown":
      return { tone: "unknown", label: "Unknown until upstream runs" };
    case "always_runs":
      return { tone: "always", label: asset && asset.kind === "sensor" ? "Observed on every run" : "Runs every time" };
    default:
      return { tone: "unknown", label: cache.state || "Unknown" };
  }
}

/** A run's status word, as the server says it, as a tone. */
export function runTone(status) {
  return { success: "ok", failed: "failed", cancelled: "stale", interrupted: "stale",
    running: "running", pending: "never", ended: "never" }[status] || "never";
}
