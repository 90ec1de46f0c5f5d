// Boot, routing (#/assets[/id], #/runs[/id], #/schedule, #/queue), the header and the banners.

import { store, on, loadHealth, loadAssets, loadState, loadRuns, loadSchedule, loadQueue, startPolling, liveRuns, readOnly } from "./store.js";
import { AssetsPage } from "./assets.js";
import { RunsPage, RunPage } from "./runs.js";
import { SchedulePage, QueuePage } from "./schedule.js";
import { h, replace, icon, toast } from "./util.js";
import { fmtInt, fmtAgo } from "./format.js";
import { api } from "./api.js";

const main = document.getElementById("main");
let current = null; // {key, view}

function parse() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  const section = parts[0] || "assets";
  if (section === "runs" && parts[1]) return { name: "run", key: `run:${parts[1]}`, params: [decodeURIComponent(parts[1])] };
  if (section === "runs") return { name: "runs", key: "runs", params: [] };
  if (section === "schedule") return { name: "schedule", key: "schedule", params: [] };
  if (section === "queue") return { name: "queue", key: "queue", params: [] };
  return { name: "assets", key: "assets", params: parts.slice(1) };
}

function route() {
  const r = parse();
  store.view = r.name;
  for (const a of document.querySelectorAll(".tabs a")) {
    const on = a.dataset.tab === (r.name === "run" ? "runs" : r.name);
    a.classList.toggle("active", on);
    if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  if (!current || current.key !== r.key) {
    if (current) current.view.destroy();
    let view;
    if (r.name === "assets") view = new AssetsPage(main);
    else if (r.name === "runs") view = new RunsPage(main);
    else if (r.name === "run") view = new RunPage(main, r.params[0]);
    else if (r.name === "queue") view = new QueuePage(main);
    else { view = new SchedulePage(main); loadSchedule(); }
    current = { key: r.key, view };
    window.scrollTo(0, 0);
  }
  if (current.view.route) current.view.route(r.params);
  paintBanners();
  document.title = r.name === "run" ? `Run ${r.params[0]} · barca` : `${r.name[0].toUpperCase()}${r.name.slice(1)} · barca`;
}

// ------------------------------------------------------------------------------------------
// Header and banners

function paintHeader() {
  const hl = store.health;
  const info = document.getElementById("server-info");
  const text = info.querySelector(".server-text");
  info.classList.toggle("down", !!store.healthError);
  if (store.healthError) {
    text.textContent = "server unreachable";
  } else if (hl) {
    text.textContent = `barca serve · v${hl.version}`;
    info.title = `scheduler ${hl.scheduler ? "on" : "off"}${hl.read_only ? " · read-only" : ""}`;
  }
  document.getElementById("readonly-tag").hidden = !(hl && hl.read_only);
  document.body.classList.toggle("read-only", !!(hl && hl.read_only));
  paintLivePill();
  paintBanners();
}

function paintLivePill() {
  const pill = document.getElementById("live-pill");
  const live = liveRuns().filter((r) => !r.external);
  const listed = (store.runs || []).filter((r) => r.status === "pending" || r.status === "running");
  const ids = new Set([...live.map((r) => r.id), ...listed.map((r) => r.id)]);
  pill.hidden = ids.size === 0;
  if (!ids.size) return;
  const first = [...ids][0];
  const run = store.live.get(first);
  pill.href = ids.size === 1 ? `#/runs/${first}` : "#/runs";
  const progress = run && run.total ? ` · ${Math.floor((100 * run.done) / run.total)}%` : "";
  replace(pill, h("span", { class: "spinner xs" }), `${fmtInt(ids.size)} run${ids.size === 1 ? "" : "s"} in progress${ids.size === 1 ? progress : ""}`);
}

function paintBanners() {
  const box = document.getElementById("banners");
  const out = [];
  if (store.healthError) {
    out.push(h("div", { class: "banner banner-warn", role: "alert" }, icon("warn"),
      h("div", null, h("b", null, "The server cannot be reached. "), "Showing what was last loaded; retrying…")));
  }
  const errors = (store.health && store.health.load_errors) || [];
  if (errors.length) {
    const files = new Set(errors.map((e) => e.file));
    const list = h("ul", { class: "banner-list" }, errors.map((e) => h("li", null,
      h("code", null, e.file), " ", h("span", { class: "banner-err" }, String(e.error).split("\n")[0]),
      e.affected_nodes && e.affected_nodes.length ? h("span", { class: "subtle" }, ` — left out: ${e.affected_nodes.map((n) => n.slice(n.lastIndexOf(":") + 1)).join(", ")}`) : null)));
    out.push(h("div", { class: "banner banner-error", role: "alert", "data-banner": "load-errors" }, icon("warn"),
      h("div", { class: "banner-body" },
        h("b", null, `${files.size} file${files.size === 1 ? "" : "s"} did not load`), h("span", { class: "subtle" }, " — their nodes are not in the graph. Fix the file and restart `barca serve`."),
        list)));
  }
  const q = store.queue;
  if (q && q.paused && store.view !== "queue") {
    const resume = readOnly() ? null : h("button", { type: "button", class: "btn sm", "data-action": "banner-resume-queue", onclick: async (e) => {
      e.currentTarget.disabled = true;
      try { await api.resumeQueue(); } catch (err) { toast(err.message, "error"); }
      loadQueue();
    } }, "Resume");
    out.push(h("div", { class: "banner banner-warn", role: "status", "data-banner": "queue-paused" }, icon("warn"),
      h("div", { class: "banner-body" }, h("b", null, "The run queue is paused"), h("span", { class: "subtle" }, `${q.paused_at ? ` since ${fmtAgo(q.paused_at)}` : ""}: new runs wait until it is resumed. `),
        h("a", { href: "#/queue" }, "Open the queue")), resume));
  }
  replace(box, out);
}

// ------------------------------------------------------------------------------------------

function setupTheme() {
  const btn = document.getElementById("theme-btn");
  btn.addEventListener("click", () => {
    const root = document.documentElement;
    const dark = root.dataset.theme ? root.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    try { localStorage.setItem("barca.theme", root.dataset.theme); } catch {}
  });
}

async function boot() {
  setupTheme();
  document.addEventListener("click", (e) => {
    for (const m of document.querySelectorAll(".menu:not([hidden])")) if (!m.parentElement.contains(e.target)) m.hidden = true;
  });
  on((what) => { if (what === "health" || what === "runs" || what === "live" || what === "queue") paintHeader(); });
  window.addEventListener("hashchange", route);
  route();
  // what the first paint needs is fast (/health, /assets, asked for by index.html); /state
  // runs `barca status` and may take seconds on a big pipeline, so the graph is drawn first
  // and coloured when it lands
  const assets = loadAssets().catch((err) => {
    replace(main, h("div", { class: "fatal" }, icon("warn"), h("h2", null, "The pipeline could not be read"),
      h("p", null, err.message), h("button", { type: "button", class: "btn", onclick: () => location.reload() }, "Retry")));
  });
  loadHealth();
  await assets;
  // after the first paint: computing status takes the server's CPU (seconds at 200,000 keys)
  requestAnimationFrame(() => setTimeout(() => { loadState(); loadRuns(); loadQueue(); }, 0));
  startPolling();
}

boot();
