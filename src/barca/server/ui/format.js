// How numbers, durations, moments, ids and the server's codes read on screen. Pure: no DOM,
// so that `node --test` checks them (tests/browser/ui/).

const INT = new Intl.NumberFormat("en-US");
export const fmtInt = (n) => (n == null ? "—" : INT.format(n));
const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
/** 1,234 as is; 200,000 as 200K (for tight spots; the exact number goes in a title). */
export const fmtCompact = (n) => (n == null ? "—" : n < 10000 ? INT.format(n) : COMPACT.format(n));

/** "1 key", "2 keys", "20,000 keys" (`many` for a plural that is not `one` + "s"). */
export function plural(n, one, many = `${one}s`) {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

/** A share in percent, one decimal at most: 299 of 300 is 99.7%, never 100% (nor 0% for a
 * share above nothing): a rounded figure must not hide the one key that failed. */
export function fmtPct(part, total) {
  if (!total) return "—";
  if (part >= total) return "100%";
  if (part <= 0) return "0%";
  const p = (100 * part) / total;
  if (p < 0.1) return "<0.1%";
  if (p > 99.9) return ">99.9%";
  return `${Number(p.toFixed(1))}%`;
}

export function fmtDur(sec) {
  if (sec == null || !isFinite(sec)) return "—";
  if (sec < 0.001) return "<1 ms";
  if (sec < 1) return `${Math.round(sec * 1000)} ms`;
  if (sec < 10) return `${sec.toFixed(2)} s`;
  if (sec < 60) return `${sec.toFixed(1)} s`;
  const m = Math.floor(sec / 60), r = Math.round(sec % 60);
  if (m < 60) return `${m}m ${String(r).padStart(2, "0")}s`;
  const hr = Math.floor(m / 60);
  return `${hr}h ${String(m % 60).padStart(2, "0")}m`;
}

/** A Date from a moment as the server writes every one: RFC 3339 UTC, `2026-12-05T16:30:18.123Z`
 * (a Date passes through). */
export function toDate(t) {
  if (t == null) return null;
  const d = new Date(t);
  return isNaN(d) ? null : d;
}

export function fmtAgo(t, now = Date.now()) {
  const d = toDate(t);
  if (!d) return "—";
  let sec = Math.round((now - d.getTime()) / 1000);
  const future = sec < 0;
  sec = Math.abs(sec);
  let text;
  if (sec < 5) return future ? "in a moment" : "just now";
  if (sec < 60) text = `${sec}s`;
  else if (sec < 3600) text = `${Math.round(sec / 60)} min`;
  else if (sec < 86400) text = `${Math.round(sec / 3600)} h`;
  else if (sec < 86400 * 30) text = `${Math.round(sec / 86400)} d`;
  else return fmtTime(d);
  return future ? `in ${text}` : `${text} ago`;
}

const TIME = new Intl.DateTimeFormat(undefined, {
  month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
});
export function fmtTime(t) {
  const d = toDate(t);
  return d ? TIME.format(d) : "—";
}

/** "pipeline.py:orders" -> {file: "pipeline.py", name: "orders"} */
export function splitId(id) {
  const i = id.lastIndexOf(":");
  return i < 0 ? { file: "", name: id } : { file: id.slice(0, i), name: id.slice(i + 1) };
}

/** A step id's key part: "pipeline.py:orders[retailer=r1]" -> "retailer=r1". */
export function stepKey(stepId) {
  const i = stepId.indexOf("[");
  return i < 0 || !stepId.endsWith("]") ? "" : stepId.slice(i + 1, -1);
}

// `barca status`'s reason codes (a node's `cache.reason`, a skipped step's `reason`), as
// a person reads them; the code itself stays in the element's title.
const REASONS = {
  materialized: "cached: nothing changed since it last ran",
  no_record: "never run",
  never_run: "never run",
  new_key: "new keys to run",
  changed: "its code or an input changed",
  failed: "its last run failed",
  artifact_missing: "its stored result is missing",
  refresh: "a recompute was asked for",
  refresh_all: "a recompute of everything was asked for",
  refresh_cascade: "a recompute upstream was asked for",
  partitions_missing: "some keys still to run",
  blocked: "blocked by failed keys upstream",
  sensor: "a sensor: observed on every run",
  task: "a task: runs every time",
  partition_selection: "left out by the key selection upstream",
  upstream_unknown: "waits for an upstream node to run",
  upstream_failed: "an upstream node failed",
  cutoff_pending: "waits for an upstream value to be read",
  sensor_output_unknown: "waits for its sensor to run",
  partitions_unknown: "its keys are known once upstream runs",
};

/** A reason code in words; an unknown code as itself, its underscores as spaces. */
export function reasonText(code) {
  if (!code) return "";
  return REASONS[code] || String(code).replace(/_/g, " ");
}
