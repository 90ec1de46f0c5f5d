// The Runs page (recent runs, newest first) and a run's page: its live progress over the event
// stream while it runs; its nodes with their timings, failures grouped by error, steps and
// logs once it has ended.

import { api, apiUrl, authorized, token } from "./api.js";
import { store, on, follow, loadRuns, readOnly } from "./store.js";
import { h, replace, icon, toast } from "./util.js";
import { fmtInt, fmtCompact, fmtDur, fmtAgo, fmtTime, toDate, splitId, stepKey, plural } from "./format.js";
import { runTone } from "./look.js";
import { keyHref, errorBlock } from "./keypage.js";

/** A link's target fetched with the token (a plain link cannot send it), shown in a new tab. */
async function openWithToken(path) {
  try {
    const res = await authorized("GET", path);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    window.open(URL.createObjectURL(await res.blob()), "_blank", "noopener");
  } catch (err) {
    toast(err.message, "error");
  }
}

const LOG_PAGE = 500;
const LIVE_LINES = 400;

/** A run's status as the server words it for run rows (`success`, never a live run's
 * `complete`). */
export function statusBadge(status, cls = "") {
  return h("span", { class: `badge tone-${runTone(status)} ${cls}`, "data-status": status },
    status === "running" || status === "pending" ? h("span", { class: "spinner xs" }) : h("i", { class: "dot" }), status);
}

function commandText(run) {
  const target = run.target ? run.target.split(",").map((t) => splitId(t).name).join(", ") : "(every asset)";
  return `barca ${run.command || "get"} ${target}`;
}

function elapsed(run, liveRun) {
  if (run.elapsed_seconds != null) return run.elapsed_seconds;
  const start = toDate(run.started_at);
  if (!start) return null;
  const end = toDate(run.finished_at) || (liveRun && liveRun.finishedAt ? new Date(liveRun.finishedAt) : new Date());
  return (end - start) / 1000;
}

// ------------------------------------------------------------------------------------------

export class RunsPage {
  constructor(root) {
    this.root = root;
    this.filter = "";
    this.build();
    this.off = on((what) => { if (what === "runs" || what === "live") this.paint(); });
    this.timer = setInterval(() => this.paint(), 5000);
    loadRuns();
    this.paint();
  }

  destroy() { this.off(); clearInterval(this.timer); }

  build() {
    this.count = h("span", { class: "subtle" });
    this.seg = h("div", { class: "segmented", role: "tablist", "aria-label": "Run status" },
      [["", "All"], ["running", "Running"], ["failed", "Failed"], ["success", "Succeeded"]].map(([v, label]) =>
        h("button", { type: "button", "data-filter": v, onclick: () => { this.filter = v; this.paint(); } }, label)));
    this.table = h("div", { class: "table-card" });
    this.more = h("div", { class: "more-row" });
    replace(this.root, h("section", { class: "page page-runs" },
      h("div", { class: "toolbar" }, h("div", { class: "page-title" }, h("h1", null, "Runs"), this.count), h("div", { class: "spacer" }), this.seg),
      h("div", { class: "page-body" }, this.table, this.more)));
  }

  paint() {
    for (const b of this.seg.children) b.setAttribute("aria-selected", String(b.dataset.filter === this.filter));
    if (!store.runs) {
      replace(this.table, store.runsError ? h("div", { class: "error-box" }, icon("warn"), store.runsError.message) : h("div", { class: "skeleton-rows pad" }, Array.from({ length: 6 }, () => h("div", { class: "skeleton-line" }))));
      return;
    }
    this.count.textContent = `${fmtInt(store.runsTotal)} run${store.runsTotal === 1 ? "" : "s"}`;
    const runs = store.runs.filter((r) => !this.filter || r.status === this.filter
      || (this.filter === "running" && r.status === "pending"));
    const rows = runs.map((r) => {
      const live = store.live.get(r.id);
      const status = live && !live.closed ? live.status : r.status;
      const prog = live && !live.closed && live.total ? h("div", { class: "mini-progress" }, h("span", { style: { width: `${Math.min(100, (100 * live.done) / live.total)}%` } })) : null;
      return h("tr", {
        class: "row-link", tabindex: 0, "data-run": r.id,
        onclick: () => { location.hash = `#/runs/${r.id}`; },
        onkeydown: (e) => { if (e.key === "Enter") location.hash = `#/runs/${r.id}`; },
      },
      h("td", null, statusBadge(status), prog),
      h("td", null, h("div", { class: "mono" }, r.id), h("div", { class: "small subtle mono ellipsis", title: r.target || "" }, commandText(r))),
      h("td", null, h("span", { class: `tag trig-${r.triggered_by || "cli"}` }, r.triggered_by || "—")),
      h("td", { class: "nowrap", title: fmtTime(r.started_at) }, fmtAgo(r.started_at), h("div", { class: "small subtle" }, fmtTime(r.started_at))),
      h("td", { class: "num" }, fmtDur(elapsed(r, live))),
      h("td", { class: "num" }, live && !live.closed ? `${fmtInt(live.done)} / ${fmtInt(live.total)}` : fmtInt(r.steps_executed),
        h("div", { class: "small subtle" }, live && !live.closed ? "steps" : `${fmtInt(r.steps_cached)} cached`)),
      h("td", { class: "err-cell" }, r.error ? h("span", { class: "err-text", title: r.error }, r.error.split("\n")[0]) : h("span", { class: "subtle" }, "")));
    });
    replace(this.table, h("table", { class: "table runs-table" },
      h("thead", null, h("tr", null, h("th", null, "Status"), h("th", null, "Run"), h("th", null, "Trigger"), h("th", null, "Started"),
        h("th", { class: "num" }, "Duration"), h("th", { class: "num" }, "Steps"), h("th", null, "Error"))),
      h("tbody", null, rows.length ? rows : h("tr", null, h("td", { colspan: 7, class: "empty" },
        store.runs.length ? "No run matches the filter." : "No run yet. Open an asset and press Materialize, or run `barca get`.")))));
    const shown = store.runs.length;
    replace(this.more, store.runsTotal > shown && store.runsLimit < 1000
      ? h("button", { type: "button", class: "btn", onclick: () => { store.runsLimit = Math.min(1000, store.runsLimit + 100); loadRuns(); } }, `Show more (${fmtInt(shown)} of ${fmtInt(store.runsTotal)})`)
      : null);
  }
}

// ------------------------------------------------------------------------------------------

export class RunPage {
  constructor(root, id) {
    this.root = root;
    this.id = id;
    this.detail = null;
    this.error = null;
    this.fullLog = null;
    this.logPage = 0;
    this.live = store.live.get(id) || null;
    this.build();
    this.off = on((what, run) => {
      if (what === "live" && run && run.id === this.id) { this.live = run; this.paint(); }
      if (what === "run-finished" && run && run.id === this.id) this.load();
      if (what === "health") this.paint();
    });
    this.timer = setInterval(() => this.tick(), 1000);
    this.load();
  }

  destroy() { this.off(); clearInterval(this.timer); }

  async load() {
    try {
      const detail = await api.run(this.id);
      this.detail = detail;
      this.error = null;
      const st = detail.run.status;
      if ((st === "pending" || st === "running") && !this.live) this.live = follow(this.id);
    } catch (err) {
      this.error = err;
    }
    this.paint();
  }

  tick() {
    // a run this server does not stream (started by a CLI beside it): its row, every few seconds
    const st = this.detail && this.detail.run.status;
    if ((st === "pending" || st === "running") && (!this.live || this.live.external) && Date.now() - (this.loadedAt || 0) > 3000) {
      this.loadedAt = Date.now();
      this.load();
    }
    if (this.live && !this.live.closed && this.durationEl && this.detail) {
      const text = fmtDur(elapsed(this.detail.run, this.live));
      this.durationEl.textContent = text;
      if (this.durationCard) this.durationCard.textContent = text;
    }
    if (this.live && !this.live.closed && this.rateEl) this.paintProgress();
  }

  build() {
    this.head = h("div", { class: "run-head" });
    this.progress = h("div", { class: "run-progress", hidden: true });
    this.cards = h("div", { class: "stat-cards" });
    this.errorBox = h("div");
    this.nodesBox = h("div", { class: "card-section" });
    this.failBox = h("div", { class: "card-section", hidden: true });
    this.outcomeBox = h("div", { class: "card-section", hidden: true });
    this.stepsBox = h("div", { class: "card-section", hidden: true });
    this.logBox = h("div", { class: "card-section" });
    this.page = h("section", { class: "page page-run" },
      h("div", { class: "crumbs" }, h("a", { href: "#/runs" }, icon("back"), "Runs"), h("span", { class: "subtle" }, "/"), h("span", { class: "mono" }, this.id)),
      this.head, this.progress, this.cards, this.errorBox,
      this.grid = h("div", { class: "run-grid" },
        h("div", { class: "run-main" }, this.nodesBox, this.failBox, this.stepsBox),
        h("div", { class: "run-side" }, this.outcomeBox)),
      this.logBox);
    replace(this.root, this.page);
  }

  /** Whether the run's record, as this page last read it, says the run has ended. */
  get recordEnded() {
    const d = this.detail && this.detail.run.status;
    return !!d && d !== "pending" && d !== "running";
  }

  get status() {
    const d = this.detail && this.detail.run.status;
    const live = this.live;
    if (live && !live.external) {
      if (!live.closed) return live.status;
      if (this.recordEnded) return d;
      return live.status;
    }
    return d || "pending";
  }

  paint() {
    if (this.error && !this.detail) {
      replace(this.head, h("div", { class: "error-box" }, icon("warn"), this.error.status === 404 ? `No run '${this.id}' on this server.` : this.error.message));
      return;
    }
    if (!this.detail) {
      replace(this.head, h("div", { class: "skeleton-block tall" }));
      replace(this.nodesBox, h("div", { class: "skeleton-block" }));
      return;
    }
    const run = this.detail.run;
    const status = this.status;
    const live = this.live && !this.live.closed ? this.live : null;
    this.page.dataset.runStatus = status;
    const actions = h("div", { class: "run-actions" });
    if (live && !readOnly()) {
      actions.append(h("button", {
        type: "button", class: "btn danger", "data-action": "cancel", disabled: !!this.cancelling,
        onclick: async () => {
          this.cancelling = true;
          this.paint();
          try { await api.cancel(this.id); toast("Cancelling the run…"); } catch (err) { this.cancelling = false; toast(err.message, "error"); this.paint(); }
        },
      }, icon("stop"), this.cancelling ? "Cancelling…" : "Cancel run"));
    }
    const only = run.target && !run.target.includes(",") ? [...store.assetById.values()].find((a) => a.id === run.target || a.id.endsWith(":" + run.target) || a.name === run.target) : null;
    if (status === "success" && only && !only.partitioned) {
      const path = `runs/${encodeURIComponent(run.id)}/output`;
      actions.append(h("a", {
        class: "btn", href: apiUrl(path), target: "_blank", rel: "noopener", title: "The stored result of this run's target",
        onclick: token() ? (e) => { e.preventDefault(); openWithToken(path); } : null,
      }, icon("external"), "Result"));
    }
    const targetLinks = run.target ? run.target.split(",").map((t) => {
      const id = [...store.assetById.keys()].find((k) => k === t || k.endsWith(":" + t)) || null;
      return id ? h("a", { href: `#/assets/${encodeURIComponent(id)}`, class: "chip chip-link" }, splitId(id).name) : h("span", { class: "chip" }, t);
    }) : [h("span", { class: "subtle" }, "every asset")];
    this.durationEl = h("span", { class: "num" }, fmtDur(elapsed(run, this.live)));
    replace(this.head,
      h("div", { class: "run-title" },
        h("div", { class: "run-title-row" }, h("h1", null, "Run ", h("span", { class: "mono" }, run.id)), statusBadge(status, "lg run-status")),
        h("div", { class: "run-meta" },
          h("span", { class: "mono cmd" }, `barca ${run.command || "get"}`), ...targetLinks,
          h("span", { class: "sep" }), h("span", { class: "subtle" }, "triggered by "), h("b", null, run.triggered_by || "—"),
          h("span", { class: "sep" }), h("span", { class: "subtle" }, "started "), h("span", { title: fmtTime(run.started_at) }, fmtTime(run.started_at)),
          h("span", { class: "sep" }), h("span", { class: "subtle" }, live ? "running for " : "took "), this.durationEl)),
      actions);
    this.paintProgress();
    this.paintCards();
    this.paintError();
    this.paintNodes();
    this.paintFailures();
    this.paintOutcome();
    this.paintSteps();
    this.paintLog();
  }

  paintProgress() {
    const live = this.live;
    const show = !!live && !live.closed && !live.external;
    this.progress.hidden = !show;
    if (!show) return;
    const pct = live.total ? Math.min(100, (100 * live.done) / live.total) : 0;
    const rate = live.rate;
    const eta = rate && live.total > live.done ? (live.total - live.done) / rate : null;
    this.rateEl = h("span", null, rate ? `${fmtInt(Math.round(rate))} steps/s` : "");
    replace(this.progress,
      h("div", { class: "progress-top" },
        h("span", { class: "spinner" }),
        h("b", null, live.status === "pending" ? "Checking the request…" : live.total ? `${fmtInt(live.done)} of ${plural(live.total, "step")}` : "Planning…"),
        live.stepsFailed ? h("span", { class: "badge sm tone-failed" }, h("i", { class: "dot" }), `${fmtInt(live.stepsFailed)} failed`) : null,
        h("div", { class: "spacer" }),
        h("span", { class: "subtle small num" }, this.rateEl, eta ? ` · about ${fmtDur(eta)} left` : "")),
      h("div", { class: "progress-bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(pct) },
        h("span", { class: `fill${live.total ? "" : " indeterminate"}`, style: { width: live.total ? `${pct}%` : "30%" } })));
  }

  paintCards() {
    const run = this.detail.run, live = this.live && !this.live.closed ? this.live : null;
    const nodes = this.detail.nodes || [];
    const failedKeys = live ? live.stepsFailed : nodes.reduce((t, n) => t + (n.failed || 0), 0);
    const card = (label, value, tone = "") => h("div", { class: `stat-card ${tone}` }, h("div", { class: "stat-label" }, label), h("div", { class: "stat-value num" }, value));
    replace(this.cards,
      card("Steps run", fmtInt(live ? live.done : run.steps_executed)),
      card("Cached", live ? fmtInt([...live.cachedNodes.values()].reduce((t, n) => t + (n || 1), 0)) : fmtInt(run.steps_cached)),
      card("Failed", fmtInt(failedKeys), failedKeys ? "tone-failed" : ""),
      card("Nodes", fmtInt(live ? live.perNode.size : nodes.length)),
      card("Duration", fmtDur(elapsed(run, this.live))));
    this.durationCard = this.cards.lastChild.querySelector(".stat-value");
  }

  paintError() {
    const run = this.detail.run;
    const env = this.live && this.live.error;
    const text = run.error || (env && env.error);
    if (!text) { replace(this.errorBox); return; }
    const failed = (this.detail.steps || []).find((st) => st.status === "failed");
    if (failed && this.traceFor !== failed.step_id) this.loadTrace(failed);
    const trace = failed && this.trace && this.trace.step.step_id === failed.step_id ? this.trace : null;
    replace(this.errorBox, h("div", { class: "callout tone-failed" }, icon("warn"),
      h("div", { class: "callout-body" }, h("b", null, "The run failed"), h("pre", { class: "error-pre plain" }, text),
        env && env.remediation ? h("div", { class: "small" }, env.remediation) : null,
        trace ? h("div", { class: "run-trace" },
          h("div", { class: "small subtle" }, "The first failed step, ",
            h("a", { class: "mono", href: keyHref(failed.node_id, failed.key || "") }, failed.key ? `${splitId(failed.node_id).name}[${failed.key}]` : splitId(failed.node_id).name), ":"),
          errorBlock(trace.attempt)) : null)));
  }

  /** The traceback of the run's first failed step: its attempt in this run. */
  async loadTrace(step) {
    this.traceFor = step.step_id;
    try {
      const got = await api.attempts(step.node_id, step.key || "", { run: this.id, limit: 1 });
      if (got.attempts.length && this.traceFor === step.step_id) {
        this.trace = { step, attempt: got.attempts[0] };
        this.paintError();
      }
    } catch { /* the error text above still says what failed */ }
  }

  paintNodes() {
    const nodes = new Map((this.detail.nodes || []).map((n) => [n.node_id, { ...n }]));
    // a stream that has ended before the run's record is read again: its counts still stand
    // (the record loaded while the run ran has none yet)
    const live = this.live && (!this.live.closed || !this.recordEnded) ? this.live : null;
    if (live) {
      const blank = (id) => ({ node_id: id, keys: 0, failed: 0, elapsed_seconds: 0, calls: null });
      for (const [id, n] of live.perNode) {
        const cur = nodes.get(id) || blank(id);
        cur.keys = Math.max(cur.keys, n.ok + n.failed);
        cur.failed = Math.max(cur.failed, n.failed);
        cur.elapsed_seconds = Math.max(cur.elapsed_seconds, n.elapsed);
        cur.active = Date.now() - n.last < 3000;
        nodes.set(id, cur);
      }
      // keys handed to the workers and not finished yet: a batched call says nothing else
      for (const [id, sub] of live.submitted) {
        const cur = nodes.get(id) || blank(id);
        if (sub.calls != null) cur.calls = Math.max(cur.calls || 0, sub.calls);
        if (cur.keys < sub.keys) { cur.of = sub.keys; cur.active = true; }
        nodes.set(id, cur);
      }
    }
    const cached = this.live ? this.live.cachedNodes : new Map();
    const list = [...nodes.values()];
    const max = Math.max(0.000001, ...list.map((n) => n.elapsed_seconds || 0));
    const rows = list.map((n) => {
      const { name, file } = splitId(n.node_id);
      const tone = n.active ? "running" : n.failed ? "failed" : "ok";
      return h("tr", null,
        h("td", null, h("a", { href: `#/assets/${encodeURIComponent(n.node_id)}`, class: "node-link" }, h("i", { class: `dot tone-${tone}` }), name), h("div", { class: "small subtle" }, file)),
        h("td", { class: "num" }, n.of ? `${fmtInt(n.keys)} / ${fmtInt(n.of)}` : fmtInt(n.keys)),
        h("td", { class: `num${n.failed ? " text-failed" : ""}` }, n.failed ? fmtInt(n.failed) : "—"),
        h("td", { class: "num" }, n.calls == null ? "—" : fmtInt(n.calls)),
        h("td", null, h("div", { class: "timing" }, h("div", { class: "timing-bar" }, h("span", { class: `tone-${tone}`, style: { width: `${Math.max(1, (100 * (n.elapsed_seconds || 0)) / max)}%` } })), h("span", { class: "num small" }, fmtDur(n.elapsed_seconds)))));
    });
    const cachedRows = [...cached].filter(([id]) => !nodes.has(id)).map(([id, keys]) => h("tr", { class: "muted-row" },
      h("td", null, h("a", { href: `#/assets/${encodeURIComponent(id)}`, class: "node-link" }, h("i", { class: "dot tone-ok" }), splitId(id).name), h("div", { class: "small subtle" }, splitId(id).file)),
      h("td", { class: "num" }, keys ? fmtInt(keys) : "—"), h("td", { class: "num" }, "—"), h("td", { class: "num" }, "—"),
      h("td", null, h("span", { class: "tag" }, "cached"))));
    replace(this.nodesBox,
      h("div", { class: "section-head" }, h("h2", null, "Nodes"), h("span", { class: "subtle small" }, "keys executed and time spent (summed over calls)")),
      h("div", { class: "table-card" }, h("table", { class: "table" },
        h("thead", null, h("tr", null, h("th", null, "Node"), h("th", { class: "num" }, "Keys"), h("th", { class: "num" }, "Failed"), h("th", { class: "num" }, "Calls"), h("th", null, "Time"))),
        h("tbody", null, rows.length || cachedRows.length ? [rows, cachedRows] : h("tr", null, h("td", { colspan: 5, class: "empty" }, live ? "Waiting for the first step…" : "No step ran: everything came from cache."))))));
  }

  /** The failures as the server grouped them: each failed step's event names its group
   * while the run is followed; after, the groups of the steps kept with the run. */
  failureGroups() {
    if (this.live && this.live.failures.size) {
      return { groups: [...this.live.failures.values()].sort((a, b) => b.count - a.count), exact: true };
    }
    return { groups: this.detail.failure_groups || [], exact: false };
  }

  paintFailures() {
    const { groups, exact } = this.failureGroups();
    this.failBox.hidden = !groups.length;
    if (!groups.length) return;
    const shown = groups.slice(0, 20);
    replace(this.failBox,
      h("div", { class: "section-head" }, h("h2", null, "Failures"),
        h("span", { class: "subtle small" }, exact ? `${groups.length} distinct error${groups.length === 1 ? "" : "s"}` : "grouped from the steps kept with the run (up to 20 per node); a node's Failures list has them all")),
      h("div", { class: "fail-groups" }, shown.map((g) => h("div", { class: "fail-group" },
        h("div", { class: "fail-count num", title: plural(g.count, "step") }, fmtCompact(g.count), h("span", null, g.count === 1 ? "step" : "steps")),
        h("div", { class: "fail-body" },
          h("div", { class: "fail-error" }, g.error),
          h("div", { class: "fail-meta" },
            h("a", { class: "chip chip-link", href: `#/assets/${encodeURIComponent(g.node_id)}` }, splitId(g.node_id).name),
            g.sample_steps.map((sid) => h("a", { class: "chip chip-link mono", href: keyHref(g.node_id, stepKey(sid)) }, stepKey(sid) || splitId(sid).name))))))));
  }

  paintOutcome() {
    const result = this.detail.result || (this.live && this.live.outcome);
    const steps = result && result.steps;
    this.outcomeBox.hidden = !steps || !steps.length;
    this.grid.classList.toggle("no-side", this.outcomeBox.hidden);
    if (this.outcomeBox.hidden) return;
    const tone = (st) => ({ ran: "ok", success: "ok", cached: "always", partial: "stale", failed: "failed", skipped: "never", blocked: "blocked" }[st] || "never");
    replace(this.outcomeBox,
      h("div", { class: "section-head" }, h("h2", null, "Plan outcome")),
      h("ul", { class: "outcome" }, steps.map((st) => h("li", null,
        h("a", { href: `#/assets/${encodeURIComponent(st.id)}` }, splitId(st.id).name),
        h("span", { class: `badge sm tone-${tone(st.status)}` }, h("i", { class: "dot" }), st.status),
        st.partitions ? h("div", { class: "small subtle" }, `${fmtInt(st.partitions.cached)} of ${plural(st.partitions.total, "key")} cached${st.partitions.will_run ? ` · ${fmtInt(st.partitions.will_run)} ran` : ""}`)
          : st.detail ? h("div", { class: "small subtle" }, st.detail) : null))),
      result.final_output !== undefined && result.final_output !== null ? [h("div", { class: "small subtle out-label" }, "Final output"),
        h("pre", { class: "code" }, typeof result.final_output === "string" ? result.final_output : JSON.stringify(result.final_output, null, 2).slice(0, 4000))] : null);
  }

  paintSteps() {
    const steps = this.detail.steps || [];
    // while the stream runs, and after it until the record is read again (its steps then)
    this.stepsBox.hidden = !steps.length || (this.live && (!this.live.closed || !this.recordEnded));
    if (this.stepsBox.hidden) return;
    const rows = steps.slice(0, 400).map((st) => h("tr", null,
      h("td", { class: "mono small step-cell" }, h("a", { href: keyHref(st.node_id, st.key || ""), class: "node-link step-link", title: "This key's value, attempts and tracebacks" }, splitId(st.node_id).name, st.key ? h("span", { class: "subtle" }, `[${st.key}]`) : null)),
      h("td", null, h("span", { class: `badge sm tone-${st.status === "success" ? "ok" : st.status === "failed" ? "failed" : "never"}` }, h("i", { class: "dot" }), st.status)),
      h("td", { class: "num small" }, fmtDur(st.elapsed_seconds)),
      h("td", { class: "err-cell" }, st.error ? h("span", { class: "err-text", title: st.error }, st.error.split("\n")[0]) : null)));
    replace(this.stepsBox,
      h("div", { class: "section-head" }, h("h2", null, "Steps"), h("span", { class: "subtle small" }, "failed first, then up to 20 per node")),
      h("div", { class: "table-card scroll-y" }, h("table", { class: "table compact" },
        h("thead", null, h("tr", null, h("th", null, "Step"), h("th", null, "Status"), h("th", { class: "num" }, "Time"), h("th", null, "Error"))),
        h("tbody", null, rows))));
  }

  paintLog() {
    const live = this.live && !this.live.closed ? this.live : null;
    // a stream that has ended before the run's record is read again: its lines still stand
    const streamed = this.live && (live || !this.recordEnded) ? this.live : null;
    let lines, note = "";
    if (streamed) {
      lines = streamed.lines.slice(-LIVE_LINES).map((l) => ({ step: l.step, stream: l.stream, kind: l.kind, text: l.text }));
      if (streamed.lines.length > LIVE_LINES || streamed.dropped) note = `last ${fmtInt(LIVE_LINES)} lines`;
    } else if (this.fullLog) {
      const pages = Math.max(1, Math.ceil(this.fullLog.length / LOG_PAGE));
      this.logPage = Math.min(this.logPage, pages - 1);
      lines = this.fullLog.slice(this.logPage * LOG_PAGE, (this.logPage + 1) * LOG_PAGE).map(logLine);
      note = `${fmtInt(this.fullLog.length)} lines · page ${this.logPage + 1} of ${pages}`;
    } else {
      lines = (this.detail.logs || []).map(logLine);
      if (lines.length >= 200) note = "last 200 lines";
    }
    const tools = h("div", { class: "log-tools" });
    if (!streamed && !this.fullLog && (this.detail.logs || []).length >= 200) {
      tools.append(h("button", { type: "button", class: "btn sm", onclick: (e) => this.loadFullLog(e.currentTarget) }, "Load the full log"));
    }
    if (this.fullLog && this.fullLog.length > LOG_PAGE) {
      const pages = Math.ceil(this.fullLog.length / LOG_PAGE);
      tools.append(
        h("button", { type: "button", class: "btn sm", disabled: this.logPage === 0, onclick: () => { this.logPage--; this.paintLog(); } }, icon("chevL"), "Earlier"),
        h("button", { type: "button", class: "btn sm", disabled: this.logPage >= pages - 1, onclick: () => { this.logPage++; this.paintLog(); } }, "Later", icon("chevR")));
    }
    const body = h("div", { class: "log", role: "log" }, lines.length ? lines.map((l) => h("div", { class: `log-line k-${l.kind || "log"}${l.stream === "stderr" ? " stderr" : ""}` },
      l.step ? h("span", { class: "log-step", title: l.step }, shortStep(l.step)) : null, h("span", { class: "log-text" }, l.text)))
      : h("div", { class: "log-empty" }, live ? "Waiting for output…" : "This run printed nothing."));
    const old = this.logBox.querySelector(".log");
    const stick = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 24;
    replace(this.logBox, h("div", { class: "section-head" }, h("h2", null, live ? "Live output" : "Log"), note ? h("span", { class: "subtle small" }, note) : null, h("div", { class: "spacer" }), tools), body);
    if (live && stick) body.scrollTop = body.scrollHeight;
  }

  async loadFullLog(btn) {
    btn.disabled = true;
    btn.textContent = "Loading…";
    try {
      const data = await api.logs(this.id);
      this.fullLog = data.logs;
      this.logPage = Math.max(0, Math.ceil(this.fullLog.length / LOG_PAGE) - 1);
    } catch (err) {
      toast(err.message, "error");
    }
    this.paintLog();
  }
}

function logLine(l) {
  return { step: l.node_id === "barca" ? "" : l.node_id, stream: l.stream, kind: l.node_id === "barca" ? "barca" : "log", text: l.line };
}

function shortStep(step) {
  const { name } = splitId(step.split("[")[0]);
  const key = stepKey(step);
  return key ? `${name}[${key}]` : name;
}
