// What the UI knows about the server: health, assets, state, runs, schedule, the run queue,
// and the runs it
// follows live over their event streams. Views subscribe with on(fn) and re-render what changed.

import { api, EventStream } from "./api.js";
import { RunProgress } from "./live.js";

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
  queue: null,           // GET /queue: running, waiting, paused
  queueError: null,
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
  lastSchedule = Date.now();
  try { store.schedule = await api.schedule(); } catch { store.schedule = store.schedule || []; }
  emit("schedule");
}

let queueInFlight = null;
export function loadQueue() {
  if (queueInFlight) return queueInFlight;
  lastQueue = Date.now();
  queueInFlight = (async () => {
    try {
      store.queue = await api.queue();
      store.queueError = null;
    } catch (err) {
      store.queueError = err;
    } finally {
      queueInFlight = null;
      emit("queue");
    }
  })();
  return queueInFlight;
}

// ------------------------------------------------------------------------------------------
// Live runs

const MAX_FOLLOWED = 6;

/** A run's progress (live.js) fed by its event stream. */
export class LiveRun extends RunProgress {
  constructor(id) {
    super(id);
    this.pending = false;
    this.es = null;
  }

  open() {
    const es = api.events(this.id);
    this.es = es;
    es.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      if (this.apply(ev)) this.finish(ev); else this.changed();
    };
    es.onerror = () => {
      // the stream reconnects by itself (with Last-Event-ID) unless the server said it is
      // over (204): then it is CLOSED.
      if (es.readyState === EventStream.CLOSED && !this.closed) this.finish(null);
    };
  }

  finish(ev) {
    this.end(ev);
    ended.add(this.id);
    if (this.es) this.es.close();
    this.es = null;
    this.changed(true);
    if (this.external) return;
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

let lastRuns = 0, lastState = 0, lastHealth = 0, lastSchedule = 0, lastQueue = 0;

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
  if (store.view === "schedule" && (force || now - lastSchedule > 15000)) loadSchedule();
  // the queue's pause shows on every page (a banner); its own page polls it itself
  if (store.view !== "queue" && (force || now - lastQueue > 15000)) loadQueue();
}
