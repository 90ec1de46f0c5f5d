// What the UI knows about the server: health, assets, state, runs, schedule, and the runs it
// follows live over their event streams. Views subscribe with on(fn) and re-render what changed.

import { api, EventStream } from "./api.js";

export const store = {
  health: null,
  healthError: null,
  assets: null,          // [asset] in topological order
  assetById: new Map(),
  state: null,           // Map id -> status entry
  stateError: null,
  stateLoading: false,
  runs: null,            // [run summary], newest first
  runsTotal: 0,
  runsLimit: 50,
  runsError: null,
  schedule: null,
  live: new Map(),       // run id -> LiveRun
  view: "",
};

// requests index.html started before the modules loaded; each is used once, and a failed
// one is asked again here (for the error's details)
const boot = window.__barcaBoot || {};
function early(name, call) {
  const p = boot[name];
  boot[name] = null;
  return p ? p.catch(() => call()) : call();
}

const listeners = new Set();
export function on(fn) { listeners.add(fn); return () => listeners.delete(fn); }
export function emit(what, detail) {
  for (const fn of [...listeners]) {
    try { fn(what, detail); } catch (err) { console.error(err); }
  }
}

export const readOnly = () => !!(store.health && store.health.read_only);

export async function loadHealth() {
  lastHealth = Date.now();
  const before = store.health ? store.health.generation : null;
  try {
    store.health = await early("health", api.health);
    store.healthError = null;
    // `barca serve --watch` reloaded the pipeline: its nodes may have changed
    if (before != null && store.health.generation !== before) loadAssets().catch(() => {});
  } catch (err) {
    store.healthError = err;
  }
  emit("health");
}

export async function loadAssets() {
  const assets = await early("assets", api.assets);
  const sig = JSON.stringify(assets);
  if (store.assets && sig === store.assetsSig) return; // unchanged (polled for --watch reloads)
  store.assetsSig = sig;
  store.assets = assets;
  store.assetById = new Map(assets.map((a) => [a.id, a]));
  emit("assets");
}

let stateInFlight = null, stateAgain = false;
/** /state runs `barca status` on the server (seconds at 200,000 keys): one request at a time;
 * a refresh asked for meanwhile runs once after it. */
export function loadState() {
  if (stateInFlight) { stateAgain = true; return stateInFlight; }
  store.stateLoading = true;
  lastState = Date.now();
  emit("state-loading");
  stateInFlight = (async () => {
    try {
      const nodes = await early("state", api.state);
      store.state = new Map(nodes.map((n) => [n.id, n]));
      store.stateError = null;
    } catch (err) {
      store.stateError = err;
    } finally {
      store.stateLoading = false;
      stateInFlight = null;
      lastState = Date.now();
      emit("state");
      if (stateAgain) { stateAgain = false; loadState(); }
    }
  })();
  return stateInFlight;
}

let runsInFlight = null;
export function loadRuns() {
  if (runsInFlight) return runsInFlight;
  runsInFlight = (async () => {
    try {
      const data = await api.runs(store.runsLimit);
      store.runs = data.runs;
      store.runsTotal = data.total;
      store.runsError = null;
      for (const r of data.runs) {
        if ((r.status === "pending" || r.status === "running") && !store.live.has(r.id)
            && liveRuns().length < 4) follow(r.id);
      }
    } catch (err) {
      store.runsError = err;
    } finally {
      runsInFlight = null;
      lastRuns = Date.now();
      emit("runs");
    }
  })();
  return runsInFlight;
}

export async function loadSchedule() {
  try { store.schedule = await api.schedule(); } catch { store.schedule = store.schedule || []; }
  emit("schedule");
}

// ------------------------------------------------------------------------------------------
// Live runs

const MAX_LINES = 2000;
const MAX_FOLLOWED = 6;

export class LiveRun {
  constructor(id) {
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
    this.startedAt = Date.now();
    this.finishedAt = null;
    this.lastEventAt = null;
    this.closed = false;
    this.pending = false;
    this.es = null;
  }

  get done() { return this.base + this.phaseDone; }
  get total() { return this.base + this.phaseTotal; }
  get live() { return !this.closed; }

  /** Keys per second since the first step finished. */
  get rate() {
    if (!this.firstStepAt || this.done < 2) return null;
    const end = this.finishedAt || Date.now();
    const sec = (end - this.firstStepAt) / 1000;
    return sec > 0.2 ? this.done / sec : null;
  }

  open() {
    const es = api.events(this.id);
    this.es = es;
    es.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      this.handle(ev);
    };
    es.onerror = () => {
      // the stream reconnects by itself (with Last-Event-ID) unless the server said it is
      // over (204): then it is CLOSED.
      if (es.readyState === EventStream.CLOSED && !this.closed) this.finish(null);
    };
  }

  line(kind, text, extra = {}) {
    if (text == null) return;
    this.lines.push({ kind, text, ...extra });
    if (this.lines.length > MAX_LINES) {
      const cut = this.lines.length - MAX_LINES;
      this.lines.splice(0, cut);
      this.dropped += cut;
    }
  }

  handle(ev) {
    this.lastEventAt = Date.now();
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
        if (!this.firstStepAt) this.firstStepAt = Date.now();
        this.phaseDone = ev.done;
        this.phaseTotal = Math.max(ev.total || 0, this.phaseTotal);
        const n = this.perNode.get(ev.node_id) || { ok: 0, failed: 0, elapsed: 0, last: 0 };
        n.last = Date.now();
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
        this.finish(ev);
        return;
      case "line":
        this.line(ev.line && ev.line.startsWith("{") ? "error" : "barca", ev.line);
        break;
      default:
        this.line("barca", ev.line || ev.text);
    }
    this.changed();
  }

  finish(ev) {
    if (ev && (ev.status === "pending" || ev.status === "running")) {
      // a run this server does not follow (a CLI run beside it): no live progress to show
      this.external = true;
      this.closed = true;
      ended.add(this.id);
      if (this.es) this.es.close();
      this.es = null;
      this.changed(true);
      return;
    }
    this.closed = true;
    ended.add(this.id);
    this.finishedAt = Date.now();
    if (ev) {
      this.status = ev.run_status;
      this.ok = ev.ok;
      this.error = ev.error;
      this.outcome = ev.outcome;
    } else if (this.status === "pending" || this.status === "running") {
      this.status = "ended";
    }
    if (this.es) this.es.close();
    this.es = null;
    this.changed(true);
    emit("run-finished", this);
    loadRuns();
    loadState();
  }

  changed(now = false) {
    if (now) { this.pending = false; emit("live", this); return; }
    if (this.pending) return;
    this.pending = true;
    // coalesce bursts (a 200,000-key run sends an event per key) into ~8 renders a second
    setTimeout(() => { this.pending = false; emit("live", this); }, 120);
  }
}

const ended = new Set(); // runs seen to end: never followed again

export function follow(id) {
  let run = store.live.get(id);
  if (run) return run;
  if (ended.has(id)) return null;
  run = new LiveRun(id);
  store.live.set(id, run);
  run.open();
  // forget the oldest finished runs beyond a few
  const finished = [...store.live.values()].filter((r) => r.closed);
  while (store.live.size > MAX_FOLLOWED && finished.length) store.live.delete(finished.shift().id);
  emit("live", run);
  return run;
}

export function liveRuns() {
  return [...store.live.values()].filter((r) => !r.closed);
}

// ------------------------------------------------------------------------------------------
// Polling: runs often while something runs or the runs page is open, state when it may have
// changed, health to notice a server that went away. Nothing while the tab is hidden.

let lastRuns = 0, lastState = 0, lastHealth = 0, lastSchedule = 0;

export function startPolling() {
  setInterval(tick, 1000);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) tick(true); });
}

function tick(force = false) {
  if (document.hidden) return;
  const now = Date.now();
  const busy = liveRuns().length > 0 || (store.runs || []).some((r) => r.status === "pending" || r.status === "running");
  const runsEvery = busy || store.view === "runs" || store.view === "run" ? 2500 : 15000;
  if (force || now - lastRuns > runsEvery) loadRuns();
  const stateEvery = busy ? 10000 : 30000;
  if (store.assets && (force || now - lastState > stateEvery)) loadState();
  if (force || now - lastHealth > 20000) {
    loadHealth();
  }
  if (store.view === "schedule" && (force || now - lastSchedule > 15000)) { lastSchedule = now; loadSchedule(); }
}
