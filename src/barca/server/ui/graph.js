// The DAG: a layered layout (Sugiyama style: layers by topological depth, long edges through
// dummy points, crossings reduced by barycentre sweeps, rows placed by isotonic regression so
// that each node sits near its neighbours), drawn as SVG with pan and zoom.

import { s, icon } from "./util.js";
import { fmtInt, fmtDur, fmtAgo } from "./format.js";
import { nodeLook, sharesOf } from "./look.js";

export const NODE_W = 240;
export const NODE_H = 80;
const GAP_X = 88;
const GAP_Y = 22;
const DUMMY_GAP = 12;
const PAD = 40;

// ------------------------------------------------------------------------------------------
// Layout

/** nodes: [{id, inputs}] in topological order. Returns positions (top-left), edge paths and
 * the drawing's size. */
export function layoutGraph(nodes) {
  const ids = new Set(nodes.map((n) => n.id));
  const preds = new Map(), succs = new Map();
  for (const n of nodes) { preds.set(n.id, []); succs.set(n.id, []); }
  for (const n of nodes) {
    for (const i of new Set(n.inputs || [])) {
      if (ids.has(i) && i !== n.id) { preds.get(n.id).push(i); succs.get(i).push(n.id); }
    }
  }

  // longest-path depth (Kahn); anything left in a cycle stays at 0
  const depth = new Map(nodes.map((n) => [n.id, 0]));
  const indeg = new Map(nodes.map((n) => [n.id, preds.get(n.id).length]));
  const queue = nodes.filter((n) => indeg.get(n.id) === 0).map((n) => n.id);
  const topo = [];
  for (let qi = 0; qi < queue.length; qi++) {
    const u = queue[qi];
    topo.push(u);
    for (const v of succs.get(u)) {
      depth.set(v, Math.max(depth.get(v), depth.get(u) + 1));
      indeg.set(v, indeg.get(v) - 1);
      if (indeg.get(v) === 0) queue.push(v);
    }
  }
  // a node with no inputs sits just left of its first reader, not far away in column 0
  for (let i = topo.length - 1; i >= 0; i--) {
    const u = topo[i];
    if (preds.get(u).length || !succs.get(u).length) continue;
    const target = Math.min(...succs.get(u).map((v) => depth.get(v))) - 1;
    if (target > depth.get(u)) depth.set(u, target);
  }

  // vertices: real nodes plus a dummy per layer a long edge crosses
  const layerCount = Math.max(0, ...depth.values()) + 1;
  const layers = Array.from({ length: layerCount }, () => []);
  const V = new Map(); // vid -> {vid, id, real, layer, up: [], down: [], y}
  const addV = (vid, layer, real) => {
    const v = { vid, real, layer, up: [], down: [], y: 0, order: 0 };
    V.set(vid, v);
    layers[layer].push(v);
    return v;
  };
  for (const n of nodes) addV(n.id, depth.get(n.id), true);
  const chains = [];
  let dummyId = 0;
  for (const n of nodes) {
    for (const p of preds.get(n.id)) {
      const chain = [V.get(p)];
      for (let l = depth.get(p) + 1; l < depth.get(n.id); l++) chain.push(addV(`\u0000d${dummyId++}`, l, false));
      chain.push(V.get(n.id));
      for (let i = 1; i < chain.length; i++) { chain[i - 1].down.push(chain[i]); chain[i].up.push(chain[i - 1]); }
      chains.push({ from: p, to: n.id, chain });
    }
  }

  // order within layers
  const setOrder = (layer) => layer.forEach((v, i) => { v.order = i; });
  layers.forEach(setOrder);
  const bary = (v, dir) => {
    const nb = dir === "up" ? v.up : v.down;
    if (!nb.length) return v.order;
    let sum = 0;
    for (const w of nb) sum += w.order;
    return sum / nb.length;
  };
  const sortLayer = (layer, dir) => {
    const keyed = layer.map((v) => [bary(v, dir), v.order, v]);
    keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    keyed.forEach(([, , v], i) => { layer[i] = v; });
    setOrder(layer);
  };
  for (let l = 1; l < layerCount; l++) sortLayer(layers[l], "up");
  let best = layers.map((l) => l.slice()), bestX = crossings(layers);
  for (let it = 0; it < 12 && bestX > 0; it++) {
    if (it % 2 === 0) for (let l = 1; l < layerCount; l++) sortLayer(layers[l], "up");
    else for (let l = layerCount - 2; l >= 0; l--) sortLayer(layers[l], "down");
    const x = crossings(layers);
    if (x < bestX) { bestX = x; best = layers.map((l) => l.slice()); }
  }
  best.forEach((layer, i) => { layers[i] = layer; setOrder(layer); });

  // rows: stacked, then pulled towards neighbours while keeping order and spacing
  const height = (v) => (v.real ? NODE_H : 0);
  const sep = (a, b) => height(a) / 2 + height(b) / 2 + (a.real && b.real ? GAP_Y : DUMMY_GAP);
  for (const layer of layers) {
    let y = 0;
    layer.forEach((v, i) => { if (i) y += sep(layer[i - 1], v); v.y = y; });
  }
  const mean = (vs) => vs.reduce((t, w) => t + w.y, 0) / vs.length;
  const place = (layer, want) => {
    const n = layer.length;
    if (!n) return;
    const S = new Array(n).fill(0);
    for (let i = 1; i < n; i++) S[i] = S[i - 1] + sep(layer[i - 1], layer[i]);
    const z = layer.map((v, i) => want(v) - S[i]);
    const w = layer.map((v) => (v.real ? 1 : 0.6));
    const fitted = isotonic(z, w);
    layer.forEach((v, i) => { v.y = fitted[i] + S[i]; });
  };
  for (let it = 0; it < 8; it++) {
    for (let l = 1; l < layerCount; l++) place(layers[l], (v) => (v.up.length ? mean(v.up) : v.y));
    for (let l = layerCount - 2; l >= 0; l--) place(layers[l], (v) => (v.down.length ? mean(v.down) : v.y));
  }
  for (let l = 0; l < layerCount; l++) {
    place(layers[l], (v) => {
      const nb = v.up.concat(v.down);
      return nb.length ? mean(nb) : v.y;
    });
  }

  let minY = Infinity, maxY = -Infinity;
  for (const v of V.values()) {
    minY = Math.min(minY, v.y - height(v) / 2);
    maxY = Math.max(maxY, v.y + height(v) / 2);
  }
  if (!isFinite(minY)) { minY = 0; maxY = 0; }
  const colX = (l) => PAD + l * (NODE_W + GAP_X);
  const cy = (v) => v.y - minY + PAD;

  const positions = new Map();
  for (const n of nodes) {
    const v = V.get(n.id);
    positions.set(n.id, { x: colX(v.layer), y: cy(v) - NODE_H / 2, layer: v.layer });
  }
  const edges = chains.map(({ from, to, chain }) => {
    const pts = [];
    chain.forEach((v, i) => {
      const x = colX(v.layer);
      if (i === 0) pts.push([x + NODE_W, cy(v)]);
      else if (i === chain.length - 1) pts.push([x - 6, cy(v)]);
      else { pts.push([x, cy(v)]); pts.push([x + NODE_W, cy(v)]); }
    });
    let d = `M${pts[0][0]},${pts[0][1]}`;
    for (let i = 1; i < pts.length; i++) {
      const [x0, y0] = pts[i - 1], [x1, y1] = pts[i];
      if (y0 === y1 || (x1 - x0) > GAP_X * 1.5) d += `L${x1},${y1}`;
      else {
        const mx = (x1 - x0) / 2;
        d += `C${x0 + mx},${y0} ${x1 - mx},${y1} ${x1},${y1}`;
      }
    }
    return { from, to, d };
  });
  return {
    positions, edges,
    width: colX(layerCount - 1) + NODE_W + PAD,
    height: maxY - minY + 2 * PAD,
  };
}

/** Weighted isotonic regression (pool adjacent violators): the non-decreasing sequence
 * closest to z. */
function isotonic(z, w) {
  const blocks = [];
  for (let i = 0; i < z.length; i++) {
    blocks.push({ sum: z[i] * w[i], w: w[i], n: 1 });
    while (blocks.length > 1) {
      const b = blocks[blocks.length - 1], a = blocks[blocks.length - 2];
      if (a.sum / a.w <= b.sum / b.w) break;
      a.sum += b.sum; a.w += b.w; a.n += b.n;
      blocks.pop();
    }
  }
  const out = [];
  for (const b of blocks) for (let k = 0; k < b.n; k++) out.push(b.sum / b.w);
  return out;
}

function crossings(layers) {
  let total = 0;
  for (let l = 0; l + 1 < layers.length; l++) {
    const segs = [];
    for (const v of layers[l]) for (const w of v.down) segs.push([v.order, w.order]);
    if (segs.length > 3000) return total; // big graphs: skip the exact count, keep sweeping
    segs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (let i = 0; i < segs.length; i++) {
      for (let j = i + 1; j < segs.length; j++) {
        if (segs[j][0] > segs[i][0] && segs[j][1] < segs[i][1]) total++;
      }
    }
  }
  return total;
}

// ------------------------------------------------------------------------------------------
// Drawing

let measureCtx = null;
function fitText(text, max, font) {
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  measureCtx.font = font;
  if (measureCtx.measureText(text).width <= max) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measureCtx.measureText(text.slice(0, mid) + "…").width <= max) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

const FONT = getComputedStyle(document.documentElement).getPropertyValue("--font").trim()
  || "Inter, system-ui, sans-serif";

export class GraphView {
  constructor(container, { onSelect }) {
    this.container = container;
    this.onSelect = onSelect;
    this.selected = null;
    this.filter = null;       // id -> bool, or null
    this.k = 1; this.tx = 0; this.ty = 0;
    this.touched = false;     // the user panned or zoomed: no automatic refit
    this.nodes = new Map();   // id -> <g>
    this.edges = [];
    this.signature = "";

    this.svg = s("svg", { class: "graph-svg", role: "img", "aria-label": "Pipeline graph" },
      s("defs", null,
        s("pattern", { id: "grid-dots", width: 22, height: 22, patternUnits: "userSpaceOnUse" },
          s("circle", { cx: 1, cy: 1, r: 1, class: "grid-dot" })),
        s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
          s("path", { d: "M1,1.5 L8.5,5 L1,8.5", class: "arrow" })),
        s("marker", { id: "arrow-hl", viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
          s("path", { d: "M1,1.5 L8.5,5 L1,8.5", class: "arrow arrow-hl" })),
        s("clipPath", { id: "card-clip", clipPathUnits: "userSpaceOnUse" },
          s("rect", { x: 0, y: 0, width: NODE_W, height: NODE_H, rx: 10 })),
        s("clipPath", { id: "bar-clip", clipPathUnits: "userSpaceOnUse" },
          s("rect", { x: 16, y: 61, width: NODE_W - 32, height: 5, rx: 2.5 }))),
      s("rect", { class: "grid-bg", x: -50000, y: -50000, width: 100000, height: 100000, fill: "url(#grid-dots)" }));
    this.viewport = s("g", { class: "viewport" });
    this.edgeLayer = s("g", { class: "edges" });
    this.nodeLayer = s("g", { class: "nodes" });
    this.viewport.append(this.edgeLayer, this.nodeLayer);
    this.svg.append(this.viewport);
    container.append(this.svg);
    this.bindInput();
    // a resize (the panel opening) refits an untouched graph, unless a node is selected: then
    // the zoom stays and the node is kept in view
    this.resizeObserver = new ResizeObserver(() => {
      if (this.selected && this.layout) this.reveal(this.selected);
      else if (!this.touched) this.fit();
    });
    this.resizeObserver.observe(container);
  }

  destroy() { this.resizeObserver.disconnect(); }

  /** Rebuild when the set of nodes or edges changed; otherwise repaint the nodes only. */
  setData(assets, state, live) {
    const sig = assets.map((a) => `${a.id}<${(a.inputs || []).join(",")}`).join("|");
    if (sig !== this.signature) {
      this.signature = sig;
      this.build(assets);
    }
    this.paint(assets, state, live);
  }

  build(assets) {
    const lay = layoutGraph(assets);
    this.layout = lay;
    this.edgeLayer.replaceChildren();
    this.nodeLayer.replaceChildren();
    this.nodes.clear();
    this.edges = lay.edges.map((e) => {
      const p = s("path", { class: "edge", d: e.d, "marker-end": "url(#arrow)" });
      p.dataset.from = e.from;
      p.dataset.to = e.to;
      this.edgeLayer.append(p);
      return p;
    });
    for (const a of assets) {
      const pos = lay.positions.get(a.id);
      const g = s("g", { class: "node", transform: `translate(${pos.x},${pos.y})`, tabindex: 0, role: "button" });
      g.dataset.id = a.id;
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); this.onSelect(a.id); }
      });
      this.nodeLayer.append(g);
      this.nodes.set(a.id, g);
    }
    this.touched = false;
    this.fit();
    this.highlight();
  }

  paint(assets, state, live) {
    for (const a of assets) {
      const g = this.nodes.get(a.id);
      if (!g) continue;
      const entry = state ? state.get(a.id) : null;
      const act = live ? live.get(a.id) : null;
      const look = nodeLook(a, entry, act, !state);
      const p = entry && entry.partitions;
      const key = JSON.stringify([look, a.name, a.kind, a.batch, act && [act.ok, act.failed, act.active, act.expected],
        p && [p.total, p.cached, p.missing, p.failed, p.blocked], entry && entry.durations, entry && entry.next_run]);
      if (g.dataset.paint === key) continue;
      g.dataset.paint = key;
      g.setAttribute("class", `node tone-${look.tone}${act && act.active ? " running" : ""}${this.selected === a.id ? " selected" : ""}${this.filter && !this.filter.has(a.id) ? " faded" : ""}`);
      g.dataset.tone = look.tone;
      g.replaceChildren(...drawNode(a, entry, look, act));
      g.setAttribute("aria-label", `${a.name}: ${look.label}`);
    }
    this.highlight();
  }

  select(id) {
    this.selected = id;
    this.highlight();
  }

  setFilter(set) {
    this.filter = set;
    this.highlight();
  }

  highlight() {
    for (const [id, g] of this.nodes) {
      g.classList.toggle("selected", id === this.selected);
      g.classList.toggle("faded", !!this.filter && !this.filter.has(id));
    }
    for (const e of this.edges) {
      const on = this.selected && (e.dataset.from === this.selected || e.dataset.to === this.selected);
      e.classList.toggle("hl", !!on);
      e.setAttribute("marker-end", on ? "url(#arrow-hl)" : "url(#arrow)");
      e.classList.toggle("faded", !!this.filter && !(this.filter.has(e.dataset.from) && this.filter.has(e.dataset.to)));
    }
    // a highlighted edge is drawn above the others
    for (const e of this.edges) if (e.classList.contains("hl")) this.edgeLayer.append(e);
  }

  apply() {
    this.viewport.setAttribute("transform", `translate(${this.tx},${this.ty}) scale(${this.k})`);
    this.container.dataset.zoom = this.k.toFixed(2);
  }

  fit() {
    if (!this.layout) return;
    const r = this.container.getBoundingClientRect();
    if (!r.width || !r.height) return;
    const { width, height } = this.layout;
    const k = Math.max(0.15, Math.min(1.1, r.width / width, (r.height - 56) / height));
    this.k = k;
    this.tx = (r.width - width * k) / 2;
    this.ty = Math.max(0, (r.height - 56 - height * k) / 2);
    this.apply();
  }

  zoomBy(f, cx, cy) {
    const r = this.container.getBoundingClientRect();
    if (cx == null) { cx = r.width / 2; cy = r.height / 2; }
    const k = Math.max(0.1, Math.min(2.5, this.k * f));
    this.tx = cx - ((cx - this.tx) * k) / this.k;
    this.ty = cy - ((cy - this.ty) * k) / this.k;
    this.k = k;
    this.touched = true;
    this.apply();
  }

  /** Scrolls a node into view (when it is out of it), keeping the zoom. */
  reveal(id) {
    const pos = this.layout && this.layout.positions.get(id);
    if (!pos) return;
    const r = this.container.getBoundingClientRect();
    const x0 = pos.x * this.k + this.tx, y0 = pos.y * this.k + this.ty;
    const x1 = x0 + NODE_W * this.k, y1 = y0 + NODE_H * this.k;
    if (x0 >= 0 && y0 >= 0 && x1 <= r.width && y1 <= r.height) return;
    this.tx = r.width / 2 - (pos.x + NODE_W / 2) * this.k;
    this.ty = r.height / 2 - (pos.y + NODE_H / 2) * this.k;
    this.apply();
  }

  bindInput() {
    const svg = this.svg;
    let drag = null;
    svg.addEventListener("pointerdown", (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, moved: false, id: e.pointerId };
    });
    svg.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < 4) return;
      if (!drag.moved) { drag.moved = true; svg.setPointerCapture(drag.id); svg.classList.add("panning"); }
      this.tx = drag.tx + dx; this.ty = drag.ty + dy;
      this.touched = true;
      this.apply();
    });
    const end = (e) => {
      if (!drag) return;
      const wasDrag = drag.moved;
      drag = null;
      svg.classList.remove("panning");
      if (wasDrag || e.type === "pointercancel") return;
      const node = e.target.closest && e.target.closest(".node");
      this.onSelect(node ? node.dataset.id : null);
    };
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointercancel", end);
    svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = this.container.getBoundingClientRect();
      const f = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0018));
      this.zoomBy(f, e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    svg.addEventListener("dblclick", (e) => {
      if (!(e.target.closest && e.target.closest(".node"))) { this.touched = false; this.fit(); }
    });
  }
}

const KIND_ICON = { asset: "asset", task: "task", sensor: "sensor" };

function drawNode(a, entry, look, act) {
  const out = [];
  out.push(s("rect", { class: "card", width: NODE_W, height: NODE_H, rx: 10 }));
  out.push(s("rect", { class: "strip", width: 4, height: NODE_H, "clip-path": "url(#card-clip)" }));
  out.push(s("rect", { class: "ring", x: -3, y: -3, width: NODE_W + 6, height: NODE_H + 6, rx: 13 }));
  const ic = icon(KIND_ICON[a.kind] || "asset", "node-icon");
  ic.setAttribute("x", 16); ic.setAttribute("y", 12); ic.setAttribute("width", 15); ic.setAttribute("height", 15);
  out.push(ic);
  const kind = a.kind.toUpperCase() + (a.batch ? " · BATCH" : "");
  const kindW = kind.length * 6.6 + 4;
  out.push(s("text", { class: "name", x: 38, y: 25 },
    fitText(a.name, NODE_W - 38 - kindW - 18, `600 13.5px ${FONT}`)));
  out.push(s("text", { class: "kind", x: NODE_W - 14, y: 24, "text-anchor": "end" }, kind));
  const right = rightText(a, entry, act);
  const rightW = right ? right.length * 6.6 + 10 : 0;
  out.push(s("text", { class: "state", x: 16, y: 49 }, fitText(look.label, NODE_W - 32 - rightW, `500 12px ${FONT}`)));
  if (right) out.push(s("text", { class: "meta", x: NODE_W - 14, y: 49, "text-anchor": "end" }, right));
  const p = entry && entry.partitions;
  if (act && act.active && p && p.total) {
    out.push(liveBar(act, act.expected || p.missing || p.total, 16, 61, NODE_W - 32, 5));
  } else if (p && p.total) {
    out.push(...partitionBar(p, 16, 61, NODE_W - 32, 5, entry.cache && entry.cache.state === "never_run"));
  } else {
    const foot = footText(a, entry);
    if (foot) out.push(s("text", { class: "foot", x: 16, y: 67 }, fitText(foot, NODE_W - 32, `400 11px ${FONT}`)));
  }
  const title = s("title", null, `${a.id}\n${look.label}${entry && entry.cache && entry.cache.detail ? "\n" + entry.cache.detail.slice(0, 300) : ""}`);
  out.push(title);
  return out;
}

function rightText(a, entry, act) {
  if (act && act.active) return act.expected ? `${fmtInt(act.ok + act.failed)} / ${fmtInt(act.expected)}` : `${fmtInt(act.ok + act.failed)} done`;
  const p = entry && entry.partitions;
  if (p && p.total != null) return `${fmtInt(p.cached)} / ${fmtInt(p.total)}`;
  if (entry && entry.durations) {
    const d = fmtDur(entry.durations.median_seconds);
    return d.startsWith("<") ? d : `~${d}`;
  }
  return "";
}

function footText(a, entry) {
  if (a.freshness && a.freshness.type === "Schedule") {
    const next = entry && entry.next_run;
    return `cron ${a.freshness.value}${next ? ` · next ${fmtAgo(next)}` : ""}`;
  }
  const d = entry && entry.durations;
  if (d && d.samples > 1) return `p95 ${fmtDur(d.p95_seconds)} over ${d.samples} recent runs`;
  return "";
}

/** A running node's bar: its keys done (and failed) in this run, of those it had to run. */
function liveBar(act, expected, x, y, w, hgt) {
  const g = s("g", { "clip-path": "url(#bar-clip)" }, s("rect", { class: "pbar-bg", x, y, width: w, height: hgt }));
  const total = Math.max(expected, act.ok + act.failed, 1);
  const okW = (w * act.ok) / total, failW = act.failed ? Math.max(3, (w * act.failed) / total) : 0;
  g.append(s("rect", { class: "pbar pbar-running", x, y, width: okW, height: hgt }));
  if (failW) g.append(s("rect", { class: "pbar pbar-failed", x: x + okW, y, width: failW, height: hgt }));
  return g;
}

/** Segments cached / stale / failed / blocked of a partition count, as SVG rects (the bar's
 * geometry is the same on every card: one clip path rounds them all). */
function partitionBar(p, x, y, w, hgt, neverRun) {
  const c = sharesOf(p), total = (p && p.total) || 0;
  const g = s("g", { "clip-path": "url(#bar-clip)" }, s("rect", { class: "pbar-bg", x, y, width: w, height: hgt }));
  if (!total) return [g];
  // a tiny share still shows (3px), taken from the largest segment
  const parts = [["ok", c.cached], [neverRun ? "never" : "stale", c.stale], ["failed", c.failed], ["blocked", c.blocked]].filter(([, n]) => n);
  const widths = parts.map(([, n]) => Math.max(3, (w * n) / total));
  const excess = widths.reduce((t, x) => t + x, 0) - w;
  if (excess > 0) widths[widths.indexOf(Math.max(...widths))] -= excess;
  let at = x;
  parts.forEach(([cls], i) => {
    g.append(s("rect", { class: `pbar pbar-${cls}`, x: at, y, width: Math.max(0, widths[i] - (i < parts.length - 1 ? 1 : 0)), height: hgt }));
    at += widths[i];
  });
  return [g];
}
