// A run followed live: what its event stream has said so far (progress, per-node counts,
// failures by the server's error group, the last lines), and which nodes are at work in the
// runs followed. Pure (no DOM, no network): store.js opens the stream and feeds the events in.

const MAX_LINES = 2000;
const RECENT_MS = 5000; // a node that finished a step this recently is still at work

export class RunProgress {
  constructor(id, now = Date.now()) {
    this.id = id;
    this.status = "pending";
    this.ok = null;
    this.error = null;
    this.outcome = null;
    this.summary = null;        // run_summary event
    this.base = 0;              // steps done in earlier phases
    this.phaseDone = 0;
    this.phaseTotal = 0;
    this.stepsOk = 0;
    this.stepsFailed = 0;
    this.cachedNodes = new Map(); // node id -> keys cached
    this.perNode = new Map();     // node id -> {ok, failed, elapsed, last}
    this.submitted = new Map();   // node id -> {keys, calls} handed to the workers
    this.failures = new Map();    // the error's group (the server's) -> {error, count, sample_steps[], node_id}
    this.lines = [];              // {kind, text, stream, step}
    this.dropped = 0;
    this.firstStepAt = null;
    this.startedAt = now;
    this.finishedAt = null;
    this.lastEventAt = null;
    this.closed = false;
    this.external = false;
  }

  get done() { return this.base + this.phaseDone; }
  get total() { return this.base + this.phaseTotal; }
  get live() { return !this.closed; }

  /** Keys per second since the first step finished. */
  rateAt(now = Date.now()) {
    if (!this.firstStepAt || this.done < 2) return null;
    const sec = ((this.finishedAt || now) - this.firstStepAt) / 1000;
    return sec > 0.2 ? this.done / sec : null;
  }

  get rate() { return this.rateAt(); }

  line(kind, text, extra = {}) {
    if (text == null) return;
    this.lines.push({ kind, text, ...extra });
    if (this.lines.length > MAX_LINES) {
      const cut = this.lines.length - MAX_LINES;
      this.lines.splice(0, cut);
      this.dropped += cut;
    }
  }

  /** Folds one event in; true when it was the run's end (`run_finished`). */
  apply(ev, now = Date.now()) {
    this.lastEventAt = now;
    switch (ev.type) {
      case "run_accepted":
        this.status = "running";
        break;
      case "run_started":
        if (this.phaseTotal || this.phaseDone) this.base += this.phaseDone;
        this.phaseTotal = ev.total || 0;
        this.phaseDone = 0;
        this.status = "running";
        break;
      case "step_finished": {
        if (!this.firstStepAt) this.firstStepAt = now;
        this.phaseDone = ev.done;
        this.phaseTotal = Math.max(ev.total || 0, this.phaseTotal);
        const n = this.perNode.get(ev.node_id) || { ok: 0, failed: 0, elapsed: 0, last: 0 };
        n.last = now;
        n.elapsed += ev.elapsed_seconds || 0;
        if (ev.ok) { n.ok++; this.stepsOk++; } else {
          n.failed++; this.stepsFailed++;
          const key = ev.error_group;
          const g = this.failures.get(key) || { error: key, count: 0, sample_steps: [], node_id: ev.node_id };
          g.count++;
          if (g.sample_steps.length < 5) g.sample_steps.push(ev.step_id);
          this.failures.set(key, g);
          this.line("error", ev.line || `${ev.step_id} failed: ${ev.error}`);
        }
        this.perNode.set(ev.node_id, n);
        break;
      }
      case "steps_submitted": {
        const n = this.submitted.get(ev.node_id) || { keys: 0, calls: null };
        n.keys += ev.keys || 0;
        if (ev.calls != null) n.calls = (n.calls || 0) + ev.calls;
        this.submitted.set(ev.node_id, n);
        break;
      }
      case "step_cached":
        this.cachedNodes.set(ev.node_id, ev.keys || 0);
        this.line("barca", ev.line);
        break;
      case "log":
        this.line("log", ev.text, { stream: ev.stream, step: ev.step_id });
        break;
      case "warning":
        this.line("warn", ev.line || ev.text);
        break;
      case "gap":
        this.line("barca", `… ${ev.missed} earlier events are no longer kept by the server`);
        break;
      case "run_summary":
        this.summary = ev;
        this.line("barca", ev.line);
        break;
      case "run_finished":
        return true;
      case "line":
        this.line(ev.line && ev.line.startsWith("{") ? "error" : "barca", ev.line);
        break;
      default:
        this.line("barca", ev.line || ev.text);
    }
    return false;
  }

  /** The run's end: `ev` is its run_finished event, or null when the stream closed without
   * one. A run the server does not follow (a CLI run beside it) ends as `external`. */
  end(ev, now = Date.now()) {
    this.closed = true;
    if (ev && (ev.status === "pending" || ev.status === "running")) {
      this.external = true;
      return;
    }
    this.finishedAt = now;
    if (ev) {
      this.status = ev.run_status;
      this.ok = ev.ok;
      this.error = ev.error;
      this.outcome = ev.outcome;
    } else if (this.status === "pending" || this.status === "running") {
      this.status = "ended";
    }
  }
}

/** node id -> {ok, failed, active, expected} over the runs followed. A node is at work
 * (`active`) while a live run has keys of it in the workers or finished one of its steps
 * in the last few seconds: a slow key keeps it running, never back to its colour before
 * the run. `expected`: the keys it had to run (its status's `missing` when the run reached
 * it, remembered in `memo` under "run|node"). */
export function activityByNode(runs, state, memo, now = Date.now()) {
  const out = new Map();
  for (const run of runs) {
    const ids = new Set([...run.perNode.keys(), ...run.submitted.keys()]);
    for (const id of ids) {
      const n = run.perNode.get(id) || { ok: 0, failed: 0, last: 0 };
      const cur = out.get(id) || { ok: 0, failed: 0, active: false, expected: 0 };
      if (!run.closed) {
        const sub = run.submitted.get(id);
        cur.ok += n.ok; cur.failed += n.failed;
        cur.active = cur.active || now - n.last < RECENT_MS || (!!sub && sub.keys > n.ok + n.failed);
        const key = `${run.id}|${id}`;
        const entry = state && state.get(id);
        if (!memo.has(key) && entry && entry.partitions) memo.set(key, entry.partitions.missing);
        cur.expected += memo.get(key) || 0;
      }
      out.set(id, cur);
    }
  }
  return out;
}
