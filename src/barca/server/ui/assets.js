// The Assets page: the graph (or a list) of every node with its status, and the panel of the
// node selected: its status, partition counts, failures grouped by error, a paged list of its
// keys, its history, and the button that runs it.

import { api } from "./api.js";
import { store, on, follow, readOnly, liveRuns } from "./store.js";
import { h, replace, clear, icon, debounce, toast } from "./util.js";
import { fmtInt, fmtCompact, fmtPct, fmtDur, fmtAgo, fmtTime, plural, reasonText } from "./format.js";
import { GraphView } from "./graph.js";
import { activityByNode } from "./live.js";
import { KeyView, keyHref } from "./keypage.js";
import { nodeLook, sharesOf, TONE_LABEL } from "./look.js";
import { openRecompute } from "./recompute.js";

const PAGE = 100;

function remembered(name) {
  try { return localStorage.getItem(name); } catch { return null; }
}
function remember(name, value) {
  try { localStorage.setItem(name, value); } catch { /* private mode: not kept */ }
}
const TONE_ORDER = ["failed", "blocked", "stale", "running", "never", "unknown", "ok", "always"];

const expectedKeys = new Map(); // "run|node" -> the node's keys to run, when the run reached it

/** node id -> {ok, failed, active, expected} over the runs followed live (live.js). */
function liveByNode() {
  return activityByNode(store.live.values(), store.state, expectedKeys);
}

export class AssetsPage {
  constructor(root) {
    this.root = root;
    this.selected = null;
    this.query = "";
    this.toneFilter = null;
    this.mode = remembered("barca.assetsView") === "list" ? "list" : "graph";
    this.panel = null;
    this.build();
    this.off = on((what) => this.onStore(what));
    this.timer = setInterval(() => { if (liveRuns().length) this.paint(); }, 1000);
    this.keys = (e) => {
      const typing = e.target.closest && e.target.closest("input, textarea");
      if (e.key === "Escape" && this.selected && !typing) location.hash = "#/assets";
      if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey) { e.preventDefault(); this.search.focus(); }
    };
    document.addEventListener("keydown", this.keys);
  }

  destroy() {
    this.off();
    clearInterval(this.timer);
    document.removeEventListener("keydown", this.keys);
    if (this.graph) this.graph.destroy();
    if (this.panel) this.panel.destroy();
  }

  build() {
    this.search = h("input", {
      class: "search-input", type: "search", placeholder: "Filter nodes…  /", "aria-label": "Filter nodes",
      oninput: debounce((e) => { this.query = e.target.value.trim().toLowerCase(); this.paint(); }, 120),
    });
    this.chips = h("div", { class: "tone-chips" });
    this.viewToggle = h("div", { class: "segmented", role: "tablist", "aria-label": "View" },
      h("button", { type: "button", "data-mode": "graph", onclick: () => this.setMode("graph") }, icon("graph"), "Graph"),
      h("button", { type: "button", "data-mode": "list", onclick: () => this.setMode("list") }, icon("list"), "List"));
    this.title = h("div", { class: "page-title" }, h("h1", null, "Assets"), h("span", { class: "subtle", id: "assets-count" }));
    const toolbar = h("div", { class: "toolbar" }, this.title, this.chips, h("div", { class: "spacer" }),
      h("label", { class: "search" }, icon("search"), this.search), this.viewToggle);

    this.graphWrap = h("div", { class: "graph-wrap" });
    this.controls = h("div", { class: "graph-controls" },
      h("button", { type: "button", class: "icon-btn", title: "Zoom in", "aria-label": "Zoom in", onclick: () => this.graph.zoomBy(1.25) }, icon("plus")),
      h("button", { type: "button", class: "icon-btn", title: "Zoom out", "aria-label": "Zoom out", onclick: () => this.graph.zoomBy(0.8) }, icon("minus")),
      h("button", { type: "button", class: "icon-btn", title: "Fit to view", "aria-label": "Fit to view", onclick: () => { this.graph.touched = false; this.graph.fit(); } }, icon("fit")));
    this.legend = h("div", { class: "legend" },
      ["ok", "stale", "failed", "blocked", "never", "always", "running"].map((t) =>
        h("span", { class: `legend-item tone-${t}` }, h("i", { class: "dot" }), TONE_LABEL[t])));
    this.stateNote = h("div", { class: "state-note", hidden: true });
    this.emptyNote = h("div", { class: "empty-state graph-empty", hidden: true }, icon("graph"), h("h3", null, "No node to show"),
      h("p", { class: "subtle" }, "barca serve found no @asset, @task or @sensor in the files it serves."));
    this.graphWrap.append(this.controls, this.legend, this.stateNote, this.emptyNote);
    this.listWrap = h("div", { class: "list-wrap" });
    this.panelWrap = h("aside", { class: "panel", hidden: true, "aria-label": "Node details" });
    this.body = h("div", { class: "assets-body" }, this.graphWrap, this.listWrap, this.panelWrap);
    replace(this.root, h("section", { class: "page page-assets" }, toolbar, this.body));
    this.graph = new GraphView(this.graphWrap, { onSelect: (id) => { location.hash = id ? `#/assets/${encodeURIComponent(id)}` : "#/assets"; } });
    this.setMode(this.mode, false);
  }

  setMode(mode, save = true) {
    this.mode = mode;
    if (save) remember("barca.assetsView", mode);
    for (const b of this.viewToggle.children) b.setAttribute("aria-selected", String(b.dataset.mode === mode));
    this.graphWrap.hidden = mode !== "graph";
    this.listWrap.hidden = mode !== "list";
    this.paint();
    if (mode === "graph" && !this.graph.touched) requestAnimationFrame(() => this.graph.fit());
  }

  route(params) {
    const id = params[0] ? decodeURIComponent(params[0]) : null;
    this.selected = id;
    this.graph.select(id);
    this.body.classList.toggle("with-panel", !!id);
    if (!id) {
      this.panelWrap.hidden = true;
      if (this.panel) { this.panel.destroy(); this.panel = null; }
    } else {
      this.panelWrap.hidden = false;
      if (!this.panel || this.panel.id !== id) {
        if (this.panel) this.panel.destroy();
        this.panel = new NodePanel(this.panelWrap, id);
      }
      this.panel.setTab(params[1] || "overview", params[2] ? decodeURIComponent(params[2]) : "");
      if (store.assets) requestAnimationFrame(() => this.graph.reveal(id));
    }
    this.paintList();
  }

  onStore(what) {
    if (what === "assets" || what === "state" || what === "live" || what === "state-loading" || what === "health") this.paint();
    if (this.panel && (what === "assets" || what === "state" || what === "health")) this.panel.refresh(what);
    if (this.panel && what === "live") this.panel.paintLive();
  }

  visibleSet(looks) {
    if (!this.query && !this.toneFilter) return null;
    const set = new Set();
    for (const a of store.assets) {
      const q = this.query;
      if (q && !a.id.toLowerCase().includes(q)) continue;
      if (this.toneFilter && looks.get(a.id).tone !== this.toneFilter) continue;
      set.add(a.id);
    }
    return set;
  }

  paint() {
    if (!store.assets) return;
    const live = liveByNode();
    const looks = new Map(store.assets.map((a) => [a.id, nodeLook(a, store.state && store.state.get(a.id), live.get(a.id), !store.state)]));
    const files = new Set(store.assets.map((a) => a.id.slice(0, a.id.lastIndexOf(":"))));
    document.getElementById("assets-count").textContent =
      `${fmtInt(store.assets.length)} node${store.assets.length === 1 ? "" : "s"} · ${files.size} file${files.size === 1 ? "" : "s"}`;
    this.paintChips(looks);
    this.looks = looks;
    const set = this.visibleSet(looks);
    this.emptyNote.hidden = store.assets.length > 0;
    const loadErrors = store.health && store.health.load_errors && store.health.load_errors.length;
    this.emptyNote.querySelector("p").textContent = loadErrors
      ? "No served file loaded: the banner above says why."
      : "barca serve found no @asset, @task or @sensor in the files it serves.";
    if (this.mode === "graph") {
      this.graph.setData(store.assets, store.state, live);
      this.graph.setFilter(set);
    } else {
      this.paintList(set);
    }
    if (!document.body.dataset.firstPaintMs) {
      // how long from the navigation until the pipeline is on screen (the browser tests read it)
      document.body.dataset.firstPaintMs = String(Math.round(performance.now()));
    }
    this.stateNote.hidden = (!(store.stateLoading && !store.state) && !store.stateError) || !store.assets.length;
    const why = store.stateError ? String(store.stateError.message) : "";
    this.stateNote.title = why;
    replace(this.stateNote, store.stateError
      ? [icon("warn"), `Status unavailable: ${why.length > 140 ? why.slice(0, 140) + "…" : why}`]
      : [h("span", { class: "spinner" }), "Computing status…"]);
    this.stateNote.classList.toggle("error", !!store.stateError);
  }

  paintChips(looks) {
    const counts = new Map();
    for (const l of looks.values()) counts.set(l.tone, (counts.get(l.tone) || 0) + 1);
    const chips = TONE_ORDER.filter((t) => counts.get(t)).map((t) =>
      h("button", {
        type: "button", class: `chip tone-${t}${this.toneFilter === t ? " active" : ""}`,
        title: this.toneFilter === t ? "Show every node" : `Show only: ${TONE_LABEL[t]}`,
        onclick: () => { this.toneFilter = this.toneFilter === t ? null : t; this.paint(); },
      }, h("i", { class: "dot" }), h("b", null, fmtInt(counts.get(t))), " ", TONE_LABEL[t].toLowerCase()));
    replace(this.chips, chips);
  }

  paintList(set) {
    if (this.mode !== "list" || !store.assets) return;
    if (set === undefined) set = this.visibleSet(this.looks || new Map());
    const rows = store.assets.filter((a) => !set || set.has(a.id)).map((a) => {
      const entry = store.state && store.state.get(a.id);
      const look = (this.looks && this.looks.get(a.id)) || nodeLook(a, entry, null, !store.state);
      const p = entry && entry.partitions;
      const c = sharesOf(p);
      const i = a.id.lastIndexOf(":");
      return h("tr", {
        class: `row-link${a.id === this.selected ? " selected" : ""}`, tabindex: 0,
        onclick: () => { location.hash = `#/assets/${encodeURIComponent(a.id)}`; },
        onkeydown: (e) => { if (e.key === "Enter") location.hash = `#/assets/${encodeURIComponent(a.id)}`; },
      },
      h("td", null, h("div", { class: "cell-name" }, icon(a.kind, "muted-icon"), h("div", null,
        h("div", { class: "name" }, a.name), h("div", { class: "subtle small" }, a.id.slice(0, i))))),
      h("td", null, h("span", { class: `badge tone-${look.tone}` }, h("i", { class: "dot" }), look.label)),
      h("td", { class: "col-parts" }, p && p.total ? h("div", { class: "parts-cell" }, htmlBar(c, "sm", entry.cache && entry.cache.state === "never_run"),
        h("span", { class: "small subtle tnum" }, `${fmtInt(c.cached)} / ${fmtInt(p.total)} cached`)) : h("span", { class: "subtle" }, "—")),
      h("td", { class: "err-cell" }, lastError(entry)),
      h("td", { class: "num" }, entry && entry.durations ? fmtDur(entry.durations.median_seconds) : "—"),
      h("td", null, a.freshness.type === "Schedule" ? [h("span", { class: "mono small" }, a.freshness.value), entry && entry.next_run ? h("div", { class: "small subtle" }, `next ${fmtAgo(entry.next_run)}`) : null] : h("span", { class: "subtle" }, a.freshness.type.toLowerCase())));
    });
    replace(this.listWrap, h("div", { class: "table-card" }, h("table", { class: "table assets-table" },
      h("thead", null, h("tr", null, h("th", null, "Name"), h("th", null, "Status"), h("th", null, "Partitions"),
        h("th", null, "Last error"), h("th", { class: "num" }, "Typical"), h("th", null, "Freshness"))),
      h("tbody", null, rows.length ? rows : h("tr", null, h("td", { colspan: 6, class: "empty" }, "No node matches the filter."))))));
  }
}

/** A node's newest failed execution as one line (its key first), from its status entry. */
function lastError(entry) {
  const last = entry && entry.last_materialization;
  if (!last || last.status !== "failed") return null;
  const text = `${last.partition ? `[${last.partition}] ` : ""}${firstLine(last.error) || "(no message)"}`;
  return h("span", { class: "err-text", title: last.error || "" }, text);
}

/** A horizontal bar of cached / stale / failed / blocked (HTML). */
export function htmlBar(c, size = "", neverRun = false) {
  const seg = (cls, n, what) => n ? h("span", { class: `seg seg-${cls}`, style: { flexGrow: String(n), minWidth: "3px" }, title: `${fmtInt(n)} ${what}` }) : null;
  return h("div", { class: `hbar ${size}` }, seg("ok", c.cached, "cached"), seg(neverRun ? "never" : "stale", c.stale, neverRun ? "never run" : "stale"),
    seg("failed", c.failed, "failed"), seg("blocked", c.blocked, "blocked"));
}

// ------------------------------------------------------------------------------------------
// The node panel

class NodePanel {
  constructor(root, id) {
    this.root = root;
    this.id = id;
    this.tab = "overview";
    this.keysState = { status: "", q: "", offset: 0, error: null };
    this.page = null;          // the last page of keys
    this.failures = null;      // the failures of the last unfiltered answer
    this.pageSeq = 0;
    this.stats = null;
    this.lastStamp = null;
    this.build();
    this.refresh("init");
  }

  destroy() {
    if (this.abort) this.abort.abort();
    clear(this.root);
  }

  get asset() { return store.assetById.get(this.id); }
  get entry() { return store.state ? store.state.get(this.id) : null; }

  build() {
    this.head = h("div", { class: "panel-head" });
    this.tabs = h("nav", { class: "panel-tabs", "aria-label": "Node sections" });
    this.liveBox = h("div", { class: "panel-live", hidden: true });
    this.summary = h("div", { class: "panel-section" });
    this.partsBox = h("div", { class: "panel-section", hidden: true });
    this.topFailBox = h("div", { class: "panel-section", hidden: true });
    this.blockedBox = h("div", { class: "panel-section", hidden: true });
    this.keysBox = h("div", { class: "panel-section keys-section" });
    this.failBox = h("div", { class: "panel-section" });
    this.historyBox = h("div", { class: "panel-section" });
    this.keyBox = h("div");
    this.keyView = new KeyView(this.keyBox);
    this.panes = {
      overview: h("div", { class: "pane", "data-pane": "overview" }, this.liveBox, this.summary, this.partsBox, this.topFailBox, this.blockedBox),
      keys: h("div", { class: "pane", "data-pane": "keys" }, this.keysBox),
      failures: h("div", { class: "pane", "data-pane": "failures" }, this.failBox),
      history: h("div", { class: "pane", "data-pane": "history" }, this.historyBox),
      key: h("div", { class: "pane", "data-pane": "key" }, this.keyBox),
    };
    this.scroll = h("div", { class: "panel-scroll" }, Object.values(this.panes));
    replace(this.root, this.head, this.tabs, this.scroll);
  }

  /** `key`: the key's label on the key tab (#/assets/<id>/key/<label>); an unpartitioned
   * node's one result is its `result` tab, the same view. */
  setTab(tab, key = this.keyLabel || "") {
    const a = this.asset;
    if (a && !a.partitioned && (tab === "keys" || tab === "failures" || tab === "key")) tab = tab === "key" ? "result" : "overview";
    if (a && a.partitioned && (tab === "result" || (tab === "key" && !key))) tab = "overview";
    const pane = tab === "result" ? "key" : tab;
    if (!this.panes[pane]) tab = "overview";
    if (tab !== this.tab || (tab === "key" && key !== this.keyLabel)) this.scroll.scrollTop = 0;
    const shown = `${tab}|${key}`;
    if (a && (tab === "key" || tab === "result") && this.keyShown !== shown) {
      this.keyShown = shown;
      this.keyView.show(this.id, tab === "key" ? key : "");
    } else if (tab !== "key" && tab !== "result") {
      this.keyShown = null; // shown again (fresh) when it is opened again
    }
    this.tab = tab;
    this.keyLabel = tab === "key" ? key : "";
    for (const [name, el] of Object.entries(this.panes)) el.hidden = name !== (tab === "result" ? "key" : tab);
    this.paintTabs();
  }

  paintTabs() {
    const a = this.asset;
    if (!a) { replace(this.tabs); return; }
    const e = this.entry;
    const p = e && e.partitions;
    const failed = this.page ? this.page.failed : p ? p.failed : null;
    const items = [["overview", "Overview", null]];
    if (a.partitioned) {
      items.push(["keys", "Keys", p ? fmtInt(p.total) : null]);
      items.push(["failures", "Failures", failed ? fmtInt(failed) : null]);
      if (this.tab === "key") items.push(["key", "Key", null]);
    } else {
      items.push(["result", "Result", null]);
    }
    items.push(["history", "History", null]);
    replace(this.tabs, items.map(([tab, label, count]) => h("a", {
      href: tab === "key" ? keyHref(this.id, this.keyLabel) : `#/assets/${encodeURIComponent(this.id)}${tab === "overview" ? "" : `/${tab}`}`,
      class: `panel-tab${tab === this.tab ? " active" : ""}`, "data-tab": tab,
      "aria-current": tab === this.tab ? "page" : null,
    }, label, count ? h("span", { class: `count${tab === "failures" ? " tone-failed" : ""}` }, count) : null)));
  }

  refresh(what) {
    const a = this.asset;
    if (!a) {
      if (store.assets) {
        replace(this.head, h("div", { class: "panel-title" }, h("h2", null, "Unknown node")), closeButton());
        replace(this.summary, h("p", { class: "subtle" }, `No node '${this.id}' in the served pipeline.`));
      }
      return;
    }
    this.paintHead();
    this.paintSummary();
    this.paintLive();
    this.setTab(this.tab);
    const entry = this.entry;
    if (a.partitioned) {
      this.partsBox.hidden = false;
      this.paintParts();
      const stamp = entry ? JSON.stringify([entry.partitions, entry.cache && entry.cache.state]) : null;
      if (!this.filterSeg) {
        this.lastStamp = stamp;
        this.buildKeys();
        this.loadPage(false);
      } else if (this.lastStamp === null) {
        this.lastStamp = stamp; // the first status: the page loaded meanwhile is current
      } else if (what === "state" && stamp !== this.lastStamp) {
        this.lastStamp = stamp;
        this.loadPage(true);
      }
    }
    // a partitioned node's history is read after its first page of keys: both scan every
    // attempt of the node, and one at a time is faster than both at once
    if (!a.partitioned && (!this.statsLoaded || what === "state")) {
      this.statsLoaded = true;
      this.loadStats(what === "state");
    } else if (a.partitioned && this.statsLoaded && what === "state") {
      this.loadStats(true);
    }
  }

  paintHead() {
    const a = this.asset;
    const look = nodeLook(a, this.entry, null, !store.state);
    const file = a.id.slice(0, a.id.lastIndexOf(":"));
    const actions = h("div", { class: "panel-actions" });
    if (!readOnly()) actions.append(this.runBtn || (this.runBtn = runButton(a)));
    actions.append(closeButton());
    replace(this.head,
      h("div", { class: "panel-title" },
        h("div", { class: "kicker" }, icon(a.kind), a.kind, a.batch ? h("span", { class: "tag" }, `batch=${a.batch.replace(/^'(.*)'$/, "$1")}`) : null),
        h("h2", { title: a.id }, a.name),
        h("div", { class: "subtle mono small" }, file)),
      actions);
    this.head.dataset.tone = look.tone;
  }

  paintSummary() {
    const a = this.asset, e = this.entry;
    const look = nodeLook(a, e, null, !store.state);
    const facts = [];
    const fact = (k, ...v) => facts.push(h("div", { class: "fact" }, h("dt", null, k), h("dd", null, ...v)));
    const nodeChip = (id) => {
      const t = store.assetById.get(id);
      const l = nodeLook(t, store.state && store.state.get(id), null, !store.state);
      return h("a", { class: `chip chip-link tone-${l.tone}`, href: `#/assets/${encodeURIComponent(id)}`, title: id }, h("i", { class: "dot" }), t ? t.name : id);
    };
    const downstream = (store.assets || []).filter((x) => (x.inputs || []).includes(a.id)).map((x) => x.id);
    fact("Upstream", a.inputs.length ? h("div", { class: "chip-row" }, a.inputs.map(nodeChip)) : h("span", { class: "subtle" }, "none"));
    fact("Downstream", downstream.length ? h("div", { class: "chip-row" }, downstream.map(nodeChip)) : h("span", { class: "subtle" }, "none"));
    fact("Freshness", a.freshness.type === "Schedule"
      ? [h("span", { class: "mono" }, a.freshness.value), e && e.next_run ? h("span", { class: "subtle" }, ` · next ${fmtTime(e.next_run)} (${fmtAgo(e.next_run)})`) : null]
      : a.freshness.type);
    if (e && e.durations) fact("Typical time", `${fmtDur(e.durations.median_seconds)} median · ${fmtDur(e.durations.p95_seconds)} p95`, h("span", { class: "subtle" }, ` (last ${e.durations.samples})`));
    if (a.env && a.env.length) fact("Environment", h("div", { class: "chip-row" }, a.env.map((v) => h("span", { class: "chip mono" }, v))));
    if (e && e.cache && e.cache.run_hash) fact("Run hash", h("span", { class: "mono small" }, e.cache.run_hash));
    const detail = e && e.cache && e.cache.detail;
    replace(this.summary,
      h("div", { class: `status-card tone-${look.tone}` },
        h("div", { class: "status-line" }, h("span", { class: `badge lg tone-${look.tone}` }, h("i", { class: "dot" }), look.label),
          e && e.cache && e.cache.reason ? h("span", { class: "subtle small reason", title: `reason: ${e.cache.reason}` }, reasonText(e.cache.reason)) : null),
        detail ? clampText(detail, 200) : (store.state ? null : h("div", { class: "skeleton-line" }))),
      h("dl", { class: "facts" }, facts));
  }

  paintLive() {
    const run = [...store.live.values()].find((r) => !r.closed && r.perNode.has(this.id)) || null;
    this.liveBox.hidden = !run;
    if (!run) return;
    const n = run.perNode.get(this.id) || { ok: 0, failed: 0 };
    replace(this.liveBox, h("div", { class: "live-card" },
      h("span", { class: "spinner" }),
      h("div", null, h("b", null, "Running now"), h("div", { class: "small subtle" }, `${plural(n.ok, "key")} done${n.failed ? ` · ${fmtInt(n.failed)} failed` : ""} in run `, h("a", { href: `#/runs/${run.id}`, class: "mono" }, run.id)))));
  }

  paintParts() {
    const e = this.entry;
    const p = e && e.partitions;
    if (!p) {
      replace(this.partsBox, h("h3", null, "Partitions"), store.state ? h("p", { class: "subtle" }, "No partition counts: the keys are not known until the upstream runs.") : h("div", { class: "skeleton-block" }));
      return;
    }
    const c = sharesOf(p);
    const neverRun = e.cache && e.cache.state === "never_run";
    const stat = (cls, label, n, filter) => h(filter ? "a" : "div", {
      class: `pstat tone-${cls}${filter ? " pstat-link" : ""}`,
      href: filter ? `#/assets/${encodeURIComponent(this.id)}/keys` : null,
      onclick: filter ? () => this.setKeys({ status: filter === "all" ? "" : filter, q: "", offset: 0 }, false) : null,
    },
    h("div", { class: "pstat-label" }, h("i", { class: "dot" }), label),
    h("div", { class: "pstat-value num" }, fmtInt(n)),
    h("div", { class: "pstat-pct small subtle" }, fmtPct(n, p.total)));
    replace(this.partsBox,
      h("div", { class: "section-head" }, h("h3", null, "Partitions"), h("span", { class: "subtle num" }, plural(p.total, "key"))),
      htmlBar(c, "lg", neverRun),
      h("div", { class: "pstats" }, stat("ok", "Cached", c.cached, "success"), neverRun ? stat("never", "Never run", c.stale) : stat("stale", "Stale", c.stale), stat("failed", "Failed", c.failed, c.failed ? "failed" : null), stat("blocked", "Blocked", c.blocked)));
    if (p.failed_still_cached) {
      this.partsBox.append(h("p", { class: "small subtle note" }, `${plural(p.failed, "key")} failed their last attempt; `,
        `${fmtInt(p.failed_still_cached)} of them are still served from an earlier cached result.`));
    }
    // keys blocked by failed keys upstream have no attempt of their own: they come from status
    if (p.blocked) {
      this.blockedBox.hidden = false;
      replace(this.blockedBox,
        h("div", { class: "section-head" }, h("h3", null, "Blocked keys"), h("span", { class: "subtle num" }, fmtInt(p.blocked))),
        h("p", { class: "small subtle" }, "These keys read a key that failed upstream; they run once it succeeds."),
        h("div", { class: "chip-row" }, (p.blocked_keys || []).map((k) => h("span", { class: "chip mono tone-blocked" }, k)),
          p.blocked > (p.blocked_keys || []).length ? h("span", { class: "subtle small" }, `+${fmtInt(p.blocked - p.blocked_keys.length)} more`) : null));
    } else {
      this.blockedBox.hidden = true;
    }
  }

  buildKeys() {
    this.filterSeg = h("div", { class: "segmented sm", role: "tablist", "aria-label": "Key status" },
      [["", "All"], ["failed", "Failed"], ["success", "Succeeded"]].map(([v, label]) =>
        h("button", { type: "button", "data-status": v, onclick: () => this.setKeys({ status: v, offset: 0, error: null }) }, label)));
    this.keySearch = h("input", {
      type: "search", class: "search-input", placeholder: "Find keys containing…", "aria-label": "Find keys",
      oninput: debounce((e) => this.setKeys({ q: e.target.value.trim(), offset: 0 }), 250),
    });
    this.keysTable = h("div", { class: "keys-table" });
    this.pager = h("div", { class: "pager" });
    this.keysNote = h("span", { class: "subtle small" });
    replace(this.keysBox,
      h("div", { class: "keys-tools" }, this.filterSeg, h("label", { class: "search grow" }, icon("search"), this.keySearch)),
      h("div", { class: "keys-note" }, this.keysNote),
      this.keysTable, this.pager);
    replace(this.failBox, h("div", { class: "skeleton-block" }));
  }

  /** Changes the key filter; `go`: switch to the Keys tab. */
  setKeys(patch, go = true) {
    Object.assign(this.keysState, patch);
    if (patch.q !== undefined && this.keySearch.value.trim() !== patch.q) this.keySearch.value = patch.q;
    if (go && this.tab !== "keys") location.hash = `#/assets/${encodeURIComponent(this.id)}/keys`;
    this.loadPage(false);
  }

  async loadPage(quiet) {
    const st = this.keysState;
    for (const b of this.filterSeg.children) b.setAttribute("aria-selected", String(b.dataset.status === st.status));
    const seq = ++this.pageSeq;
    if (this.abort) this.abort.abort();
    this.abort = new AbortController();
    this.keysTable.classList.add("loading");
    const range = this.pager.querySelector(".range");
    if (range && !range.querySelector(".spinner")) range.append(h("span", { class: "spinner xs" }));
    if (!this.page && !quiet) replace(this.keysTable, skeletonRows(10));
    if (!this.statsLoaded) replace(this.historyBox, h("div", { class: "skeleton-block" }));
    try {
      const page = await api.partitions(this.id, { status: st.status, q: st.q, error: st.error, offset: st.offset, limit: PAGE }, { signal: this.abort.signal });
      if (seq !== this.pageSeq) return;
      const moved = this.page && (this.page.offset !== page.offset || this.page.matched !== page.matched);
      this.page = page;
      this.failures = page.failures;
      this.paintKeys();
      if (moved && this.tab === "keys") this.scroll.scrollTop = 0;
      this.paintFailures();
      this.paintTabs();
      if (!this.statsLoaded) { this.statsLoaded = true; this.loadStats(false); }
    } catch (err) {
      if (err.name === "AbortError" || seq !== this.pageSeq) return;
      replace(this.keysTable, h("div", { class: "error-box" }, icon("warn"), `Keys unavailable: ${err.message}`));
      replace(this.failBox, h("div", { class: "error-box" }, icon("warn"), `Failures unavailable: ${err.message}`));
    } finally {
      if (seq === this.pageSeq) this.keysTable.classList.remove("loading");
    }
  }

  paintKeys() {
    const page = this.page, st = this.keysState;
    const rows = page.keys.map((k) => {
      const failed = k.status === "failed";
      const tr = h("tr", { class: `key-row${failed ? " is-failed" : ""}`, "data-key": k.key },
        h("td", { class: "mono key-cell", title: k.key }, h("a", { class: "key-link", href: keyHref(this.id, k.key), title: "This key's value, attempts and tracebacks", onclick: (e) => e.stopPropagation() }, k.key)),
        h("td", null, h("span", { class: `badge sm tone-${failed ? "failed" : "ok"}` }, h("i", { class: "dot" }), failed ? "failed" : "success")),
        h("td", { class: "small subtle nowrap", title: fmtTime(k.created_at) }, fmtAgo(k.created_at)),
        h("td", { class: "err-cell" }, failed ? h("span", { class: "err-text", title: k.error || "" }, firstLine(k.error)) : h("span", { class: "mono small subtle", title: k.run_hash }, (k.run_hash || "").slice(0, 12))));
      if (failed && k.error) {
        tr.classList.add("expandable");
        tr.title = "Show the whole error";
        tr.addEventListener("click", () => {
          const next = tr.nextElementSibling;
          if (next && next.classList.contains("key-detail")) { next.remove(); tr.classList.remove("open"); return; }
          tr.classList.add("open");
          tr.after(h("tr", { class: "key-detail" }, h("td", { colspan: 4 },
            k.error_type ? h("div", { class: "small subtle" }, k.error_type) : null, h("pre", { class: "error-pre" }, k.error))));
        });
      }
      return tr;
    });
    const empty = st.q || st.status
      ? "No key matches."
      : "No key of this node has run yet: keys appear here once they have an attempt.";
    replace(this.keysTable, h("table", { class: "table keys" },
      h("thead", null, h("tr", null, h("th", null, "Key"), h("th", null, "Status"), h("th", null, "Updated"), h("th", null, st.status === "success" ? "Run hash" : "Error / run hash"))),
      h("tbody", null, rows.length ? rows : h("tr", null, h("td", { colspan: 4, class: "empty" }, empty)))));
    const from = page.matched ? page.offset + 1 : 0, to = page.offset + page.keys.length;
    const pages = Math.max(1, Math.ceil(page.matched / PAGE));
    const current = Math.floor(page.offset / PAGE) + 1;
    const e = this.entry, total = e && e.partitions ? e.partitions.total : null;
    replace(this.keysNote, st.q || st.status || st.error != null
      ? `${fmtInt(page.matched)} of ${plural(page.total, "key")} match`
      : `${plural(page.total, "key")} with an attempt${total != null && total > page.total ? ` · ${fmtInt(total - page.total)} never run` : ""} · last attempt of each`,
    st.error != null ? h("button", { type: "button", class: "chip chip-btn error-filter", title: "Show every key again", onclick: () => this.setKeys({ error: null, offset: 0 }) }, `failed with: ${st.error || "(no message)"}`, " ✕") : null);
    const pageInput = h("input", {
      class: "page-input num", type: "number", min: 1, max: pages, value: String(current), "aria-label": "Page",
      onchange: (ev) => {
        const n = Math.min(pages, Math.max(1, parseInt(ev.target.value, 10) || 1));
        this.setKeys({ offset: (n - 1) * PAGE });
      },
    });
    replace(this.pager,
      h("span", { class: "small subtle num range" }, `${fmtInt(from)}–${fmtInt(to)} of ${fmtInt(page.matched)}`),
      h("div", { class: "spacer" }),
      h("button", { type: "button", class: "btn sm", "data-page": "prev", disabled: page.offset === 0, onclick: () => this.setKeys({ offset: Math.max(0, page.offset - PAGE) }) }, icon("chevL"), "Prev"),
      h("span", { class: "small subtle page-of" }, "Page ", pageInput, ` of ${fmtInt(pages)}`),
      h("button", { type: "button", class: "btn sm", "data-page": "next", disabled: page.next_offset == null, onclick: () => this.setKeys({ offset: page.next_offset }) }, "Next", icon("chevR")));
  }

  paintFailures() {
    const page = this.page;
    const groups = page.failure_groups || [];
    const failed = page.failed || 0;
    if (!failed) {
      this.topFailBox.hidden = true;
      replace(this.failBox, h("div", { class: "empty-state" }, h("h3", null, "No failed key"), h("p", { class: "subtle" }, "Every key with an attempt succeeded on its last attempt.")));
      return;
    }
    const rest = page.failed_ungrouped || 0;
    const card = (g) => h("div", { class: "fail-group", "data-count": String(g.count) },
      h("div", { class: "fail-count num", title: `${plural(g.count, "key")}${g.at_least ? " or more" : ""}` }, `${fmtCompact(g.count)}${g.at_least ? "+" : ""}`, h("span", null, g.count === 1 ? "key" : "keys")),
      h("div", { class: "fail-body" },
        h("div", { class: "fail-error" }, g.error || "(no message)"),
        h("div", { class: "fail-meta" },
          g.error_type ? h("span", { class: "tag" }, g.error_type) : null,
          g.sample_keys.slice(0, 5).map((k) => h("button", {
            type: "button", class: "chip mono chip-btn", title: "Show this key",
            onclick: () => this.setKeys({ status: "failed", q: k, error: null, offset: 0 }),
          }, k)),
          g.count > Math.min(5, g.sample_keys.length) ? h("span", { class: "small subtle" }, `+${fmtInt(g.count - Math.min(5, g.sample_keys.length))} more`) : null,
          // a group merged over keys that each name themselves has no one error to filter by
          g.generic ? null : h("button", { type: "button", class: "btn sm list-group", onclick: () => this.setKeys({ status: "failed", q: "", error: g.error, offset: 0 }) }, "List these keys"))));
    replace(this.failBox,
      h("div", { class: "section-head" },
        h("span", { class: "subtle small" }, `${fmtInt(failed)} failed key${failed === 1 ? "" : "s"}, grouped by the first line of their error`),
        h("div", { class: "spacer" }),
        h("button", { type: "button", class: "btn sm", onclick: () => this.setKeys({ status: "failed", q: "", error: null, offset: 0 }) }, "List failed keys")),
      h("div", { class: "fail-groups" }, groups.map(card)),
      rest > 0 ? h("p", { class: "small subtle" }, `${fmtInt(rest)} more failed key${rest === 1 ? "" : "s"} with less common errors: see them under Keys › Failed.`) : null);
    this.topFailBox.hidden = false;
    replace(this.topFailBox,
      h("div", { class: "section-head" }, h("h3", null, "Top errors"), h("div", { class: "spacer" }),
        h("a", { href: `#/assets/${encodeURIComponent(this.id)}/failures`, class: "small" }, `All failures (${fmtInt(failed)}) →`)),
      h("div", { class: "fail-groups" }, groups.slice(0, 3).map(card)));
  }

  async loadStats(quiet) {
    const seq = (this.statsSeq = (this.statsSeq || 0) + 1);
    if (!this.stats && !quiet) replace(this.historyBox, h("div", { class: "skeleton-block" }));
    try {
      const data = await api.asset(this.id);
      if (seq !== this.statsSeq) return;
      this.stats = data.stats;
      this.paintStats();
    } catch (err) {
      if (seq !== this.statsSeq) return;
      replace(this.historyBox, h("p", { class: "subtle" }, `History unavailable: ${err.message}`));
    }
  }

  paintStats() {
    const st = this.stats;
    const a = this.asset;
    const kv = (k, v) => h("div", { class: "mini-stat" }, h("div", { class: "mini-label" }, k), h("div", { class: "mini-value num" }, v));
    const recent = (st.recent_runs || []).slice(0, 25);
    replace(this.historyBox,
      h("div", { class: "mini-stats" },
        kv(a && a.partitioned ? "Key attempts" : "Attempts", fmtInt(st.total_runs)),
        kv("Failures", fmtInt(st.failures)),
        kv("Cache hits", st.cache_hit_rate == null ? "—" : fmtPct(st.cache_hit_rate, 1)),
        kv("Median", fmtDur(st.median_elapsed_seconds)),
        kv("p95", fmtDur(st.p95_elapsed_seconds))),
      h("div", { class: "section-head" }, h("h3", null, "Latest attempts")),
      recent.length ? h("table", { class: "table compact keys" },
        h("thead", null, h("tr", null, h("th", null, a && a.partitioned ? "Key" : "Attempt"), h("th", null, "Status"), h("th", { class: "num" }, "Time"), h("th", null, "When"))),
        h("tbody", null, recent.map((r) => h("tr", null,
          h("td", { class: "mono small key-cell" }, r.key || "—"),
          h("td", null, h("span", { class: `badge sm tone-${r.status === "success" ? "ok" : r.status === "failed" ? "failed" : "never"}`, title: r.error_message || "" }, h("i", { class: "dot" }), r.status)),
          h("td", { class: "num small" }, fmtDur(r.elapsed_seconds)),
          h("td", { class: "small subtle", title: fmtTime(r.created_at) }, fmtAgo(r.created_at)))))) : h("p", { class: "subtle small" }, "No attempt recorded yet."));
  }
}

function closeButton() {
  return h("a", { class: "icon-btn", href: "#/assets", title: "Close (Esc)", "aria-label": "Close" }, icon("close"));
}

function firstLine(text) {
  return String(text || "").split("\n")[0];
}

function clampText(text, n) {
  if (text.length <= n) return h("p", { class: "detail" }, text);
  const p = h("p", { class: "detail" }, text.slice(0, n) + "… ");
  p.append(h("button", { type: "button", class: "link-btn", onclick: () => replace(p, text) }, "more"));
  return p;
}

function skeletonRows(n) {
  return h("div", { class: "skeleton-rows" }, Array.from({ length: n }, () => h("div", { class: "skeleton-line" })));
}

/** The Run button: `get` for an asset or sensor, `run` for a task; its menu adds a forced
 * recompute (`refresh`), which for a partitioned node first asks which keys and confirms
 * their count (recompute.js). */
export function runButton(a) {
  const command = a.kind === "task" ? "run" : "get";
  const start = async (refresh, btn) => {
    const body = { command, targets: [a.id] };
    if (refresh) body.refresh = [a.id];
    btn.disabled = true;
    const label = btn.querySelector(".label");
    const was = label ? label.textContent : "";
    if (label) label.textContent = "Starting…";
    try {
      const res = await api.start(body);
      follow(res.run_id);
      toast(`Run ${res.run_id} started`, "ok");
      location.hash = `#/runs/${res.run_id}`;
    } catch (err) {
      toast(`${err.message}${err.remediation ? ` — ${err.remediation}` : ""}`, "error");
    } finally {
      btn.disabled = false;
      if (label) label.textContent = was;
    }
  };
  const main = h("button", { type: "button", class: "btn primary", "data-action": "run", title: `barca ${command} ${a.name}` },
    icon("play"), h("span", { class: "label" }, a.kind === "task" ? "Run" : "Materialize"));
  main.addEventListener("click", () => start(false, main));
  const menu = h("div", { class: "menu", hidden: true, role: "menu" },
    h("button", { type: "button", role: "menuitem", onclick: () => { menu.hidden = true; start(false, main); } },
      h("b", null, a.kind === "task" ? "Run" : "Materialize"), h("span", { class: "small subtle" }, "Runs only what is stale or failed; the rest comes from cache.")),
    a.partitioned && command === "get"
      ? h("button", { type: "button", role: "menuitem", "data-action": "recompute", onclick: () => { menu.hidden = true; openRecompute(a); } },
        h("b", null, "Recompute…"), h("span", { class: "small subtle" }, "Choose the keys (all, failed, a search) and run them again, even if cached."))
      : h("button", { type: "button", role: "menuitem", "data-action": "recompute", onclick: () => { menu.hidden = true; start(true, main); } },
        h("b", null, "Recompute"), h("span", { class: "small subtle" }, `Refresh ${a.name}: it runs again, even if cached.`)));
  const more = h("button", { type: "button", class: "btn primary split", "aria-label": "More run options", onclick: (e) => { e.stopPropagation(); menu.hidden = !menu.hidden; } }, icon("chevD"));
  return h("div", { class: "split-btn" }, main, more, menu);
}

