// The pages an operator works from: Schedule (each job's cron in words, its next fires, its
// last outcomes; pause, resume, fire now) and Queue (the runs running and waiting; pause and
// resume of the queue, cancel of a waiting run). What reads as words is in cron.js.

import { api } from "./api.js";
import { store, on, follow, loadSchedule, loadQueue, readOnly } from "./store.js";
import { h, replace, icon, toast } from "./util.js";
import { fmtAgo, fmtDur, fmtTime, plural, splitId } from "./format.js";
import { cronText, upcoming, outcomes, untilAfter, queueText } from "./cron.js";
import { statusBadge } from "./runs.js";
import { runTone } from "./look.js";

const PAUSES = [["Until resumed", null], ["For 1 hour", 1], ["For 1 day", 24]];

function errorText(err) {
  return `${err.message}${err.remediation ? ` — ${err.remediation}` : ""}`;
}

/** A button that runs `action` once at a time, saying so while it runs. */
function actionButton(label, attrs, action) {
  const btn = h("button", { type: "button", class: "btn sm", ...attrs }, label);
  btn.addEventListener("click", async (e) => {
    e.stopPropagation();
    btn.disabled = true;
    try { await action(); } catch (err) { toast(errorText(err), "error"); } finally { btn.disabled = false; }
  });
  return btn;
}

export class SchedulePage {
  constructor(root) {
    this.root = root;
    this.fires = new Map();   // job id -> its /schedule/{job}/fires answer
    this.open = new Set();    // the jobs whose details are shown
    this.box = h("div", { class: "table-card" });
    this.queueLink = h("a", { class: "small", href: "#/queue" });
    replace(root, h("section", { class: "page page-schedule" },
      h("div", { class: "toolbar" }, h("div", { class: "page-title" }, h("h1", null, "Schedule"), h("span", { class: "subtle", id: "sched-note" })),
        h("div", { class: "spacer" }), this.queueLink),
      h("div", { class: "page-body" }, this.box)));
    this.off = on((what, run) => {
      if (what === "schedule") this.loadFires();
      // a job's run ended: its outcome, and the job's last run, are new
      if (what === "run-finished" && run && (store.schedule || []).some((j) => j.last_run === run.id)) loadSchedule();
      if (what === "schedule" || what === "health" || what === "queue") this.paint();
    });
    this.timer = setInterval(() => this.paint(), 15000);
    this.paint();
  }

  destroy() { this.off(); clearInterval(this.timer); }

  /** Each job's next fires and last runs (one request a job). */
  async loadFires() {
    const jobs = store.schedule || [];
    await Promise.all(jobs.map(async (j) => {
      try { this.fires.set(j.id, await api.jobFires(j.id)); } catch { /* shown without them */ }
    }));
    this.paint();
  }

  /** After an action: the jobs again, then their fires. */
  async reload() {
    await loadSchedule();
  }

  paint() {
    const note = document.getElementById("sched-note");
    const hl = store.health;
    if (note) note.textContent = hl ? (hl.scheduler ? (hl.read_only ? "read-only: nothing fires" : "the scheduler is on") : "the scheduler is off (--no-schedule)") : "";
    this.queueLink.textContent = store.queue ? `Queue: ${queueText(store.queue)} →` : "Queue →";
    const jobs = store.schedule;
    if (!jobs) { replace(this.box, h("div", { class: "skeleton-rows pad" }, h("div", { class: "skeleton-line" }), h("div", { class: "skeleton-line" }))); return; }
    if (!jobs.length) {
      replace(this.box, h("div", { class: "empty-state" }, icon("clock"), h("h3", null, "Nothing is scheduled"),
        h("p", { class: "subtle" }, "Give a node freshness=Schedule(\"0 6 * * *\") and `barca serve` materializes it on that cron.")));
      return;
    }
    const rows = [];
    for (const j of jobs) {
      rows.push(this.row(j));
      if (this.open.has(j.id)) rows.push(this.detail(j));
    }
    replace(this.box, h("table", { class: "table schedule-table" },
      h("thead", null, h("tr", null, h("th", null, "Node"), h("th", null, "Schedule"), h("th", null, "Next fire"), h("th", null, "Last fired"),
        h("th", null, "Last outcomes"), h("th", { class: "actions-col" }, readOnly() ? "" : "Actions"))),
      h("tbody", null, rows)));
  }

  row(j) {
    const words = cronText(j.cron);
    const fired = this.fires.get(j.id);
    const next = upcoming(j.next_fire ? [j.next_fire] : [], j)[0];
    const open = this.open.has(j.id);
    const toggle = () => { if (open) this.open.delete(j.id); else this.open.add(j.id); this.paint(); };
    return h("tr", { class: `job-row${j.paused ? " is-paused" : ""}`, "data-job": j.id },
      h("td", null,
        h("div", { class: "cell-name" },
          h("button", { type: "button", class: "icon-btn xs", "data-action": "details", "aria-expanded": String(open), title: open ? "Hide the details" : "Next fires and last runs", onclick: toggle }, icon(open ? "chevD" : "chevR")),
          h("div", null,
            h("a", { class: "node-link", href: `#/assets/${encodeURIComponent(j.id)}` }, icon(j.kind || "asset", "muted-icon"), splitId(j.id).name),
            h("div", { class: "small subtle" }, splitId(j.id).file)))),
      h("td", { class: "cron-cell" },
        h("div", { class: "cron-words" }, words || h("span", { class: "mono" }, j.cron)),
        words ? h("div", { class: "mono small subtle", title: fired && fired.timezone ? `in the server's time zone (${fired.timezone})` : "" }, j.cron) : null),
      h("td", { class: next && next.skipped ? "skipped" : "" }, next
        ? [fmtTime(next.at), h("div", { class: "small subtle" }, next.skipped ? "skipped: paused" : fmtAgo(next.at))]
        : h("span", { class: "subtle" }, "—")),
      h("td", null, j.last_fired ? [fmtTime(j.last_fired), h("div", { class: "small subtle" }, fmtAgo(j.last_fired))] : h("span", { class: "subtle" }, "never")),
      h("td", null, this.outcomeDots(j, fired)),
      h("td", { class: "actions-col" }, this.actions(j)));
  }

  outcomeDots(j, fired) {
    const runs = fired ? fired.runs : null;
    if (!runs) {
      return j.last_run ? [h("a", { class: "mono", href: `#/runs/${j.last_run}` }, j.last_run), " ", j.last_run_status ? statusBadge(j.last_run_status, "sm") : null] : h("span", { class: "subtle" }, "—");
    }
    if (!runs.length) return h("span", { class: "subtle" }, "no run yet");
    const o = outcomes(runs);
    return h("div", { class: "outcomes" },
      h("div", { class: "outcome-dots" }, runs.map((r) => h("a", {
        class: `job-outcome tone-${runTone(r.status)}`, href: `#/runs/${r.id}`, "data-status": r.status,
        title: `${r.status} · ${fmtTime(r.started_at)}${r.triggered_by === "api" ? " · fired by hand" : ""}${r.error ? `\n${r.error.split("\n")[0]}` : ""}`,
      }, h("i", { class: "dot" })))),
      o.streak && o.streak.status === "failed" && o.streak.count > 1
        ? h("div", { class: "small text-failed" }, `failed ${o.streak.count} times in a row`)
        : h("div", { class: "small subtle" }, `last ${plural(runs.length, "run")}: ${o.success} ok${o.failed ? `, ${o.failed} failed` : ""}`));
  }

  actions(j) {
    if (readOnly()) return j.paused ? h("span", { class: "badge sm tone-stale" }, h("i", { class: "dot" }), "paused") : null;
    const fire = actionButton([icon("play"), "Fire now"], { "data-action": "fire", title: "Start the run a tick starts, now (the cron is unchanged)" }, async () => {
      const res = await api.fireJob(j.id);
      follow(res.run_id);
      toast(`${splitId(j.id).name}: run ${res.run_id} started`, "ok",
        h("a", { href: `#/runs/${res.run_id}`, class: "toast-link" }, "Open"));
      await this.reload();
    });
    if (j.paused) {
      const resume = actionButton("Resume", { "data-action": "resume", class: "btn sm primary" }, async () => {
        await api.resumeJob(j.id);
        toast(`${splitId(j.id).name} fires on its cron again`, "ok");
        await this.reload();
      });
      return h("div", { class: "job-actions" },
        h("span", { class: "badge sm tone-stale", title: j.paused_until ? `until ${fmtTime(j.paused_until)}` : "until resumed" }, h("i", { class: "dot" }),
          j.paused_until ? `paused until ${fmtTime(j.paused_until)}` : "paused"), resume, fire);
    }
    const menu = h("div", { class: "menu", hidden: true, role: "menu" }, PAUSES.map(([label, hours]) =>
      h("button", { type: "button", role: "menuitem", "data-pause": hours == null ? "resumed" : String(hours), onclick: async (e) => {
        e.stopPropagation();
        menu.hidden = true;
        try {
          await api.pauseJob(j.id, hours == null ? null : untilAfter(hours));
          toast(`${splitId(j.id).name} paused ${label.toLowerCase()}`, "ok");
          await this.reload();
        } catch (err) { toast(errorText(err), "error"); }
      } }, h("b", null, label))));
    const pause = h("button", { type: "button", class: "btn sm", "data-action": "pause", "aria-haspopup": "menu", onclick: (e) => { e.stopPropagation(); menu.hidden = !menu.hidden; } }, "Pause", icon("chevD"));
    return h("div", { class: "job-actions" }, h("div", { class: "split-btn" }, pause, menu), fire);
  }

  detail(j) {
    const fired = this.fires.get(j.id);
    const fires = fired ? upcoming(fired.next_fires, j) : [];
    const runs = fired ? fired.runs : [];
    const nextBox = h("div", { class: "job-next" }, h("h3", null, "Next fires"),
      !fired ? h("div", { class: "skeleton-line" })
        : fires.length ? h("ol", { class: "fire-list" }, fires.map((f) => h("li", { class: f.skipped ? "skipped" : "", "data-at": f.at },
          h("span", null, fmtTime(f.at)), h("span", { class: "small subtle" }, f.skipped ? " skipped: paused" : ` ${fmtAgo(f.at)}`))))
          : h("p", { class: "subtle small" }, "None: this server fires nothing (--no-schedule or --read-only)."),
      fired && fired.timezone ? h("p", { class: "small subtle" }, `The cron is read in the server's time zone (${fired.timezone}); times are shown in yours.`) : null);
    const runsBox = h("div", { class: "job-runs" }, h("h3", null, "Last runs"),
      !fired ? h("div", { class: "skeleton-line" })
        : runs.length ? h("table", { class: "table compact" },
          h("tbody", null, runs.map((r) => h("tr", { class: "row-link", "data-run": r.id, onclick: () => { location.hash = `#/runs/${r.id}`; } },
            h("td", null, statusBadge(r.status, "sm")),
            h("td", { class: "mono small" }, h("a", { href: `#/runs/${r.id}` }, r.id)),
            h("td", { class: "small", title: fmtTime(r.started_at) }, fmtAgo(r.started_at)),
            h("td", { class: "small num" }, fmtDur(r.elapsed_seconds)),
            h("td", { class: "small subtle" }, r.triggered_by === "api" ? "fired by hand" : r.triggered_by === "catch_up" ? "catch-up" : "on its cron"),
            h("td", { class: "err-cell" }, r.error ? h("span", { class: "err-text", title: r.error }, r.error.split("\n")[0]) : null)))))
          : h("p", { class: "subtle small" }, "No run of this job yet."));
    return h("tr", { class: "job-detail", "data-job": j.id }, h("td", { colspan: 6 }, h("div", { class: "job-detail-body" }, nextBox, runsBox)));
  }
}

// ------------------------------------------------------------------------------------------

export class QueuePage {
  constructor(root) {
    this.root = root;
    this.summary = h("span", { class: "subtle", id: "queue-summary" });
    this.actions = h("div", { class: "queue-actions" });
    this.state = h("div");
    this.running = h("div", { class: "card-section", "data-section": "running" });
    this.waiting = h("div", { class: "card-section", "data-section": "waiting" });
    replace(root, h("section", { class: "page page-queue" },
      h("div", { class: "toolbar" }, h("div", { class: "page-title" }, h("h1", null, "Queue"), this.summary), h("div", { class: "spacer" }), this.actions),
      h("div", { class: "page-body" }, this.state, this.running, this.waiting)));
    this.off = on((what) => { if (what === "queue" || what === "health") this.paint(); });
    this.timer = setInterval(() => { if (!document.hidden) loadQueue(); }, 2000);
    loadQueue();
    this.paint();
  }

  destroy() { this.off(); clearInterval(this.timer); }

  paint() {
    const q = store.queue;
    if (!q) {
      replace(this.state, store.queueError ? h("div", { class: "error-box" }, icon("warn"), store.queueError.message) : h("div", { class: "skeleton-block" }));
      return;
    }
    this.summary.textContent = queueText(q);
    const act = [];
    if (!readOnly()) {
      act.push(q.paused
        ? actionButton([icon("play"), "Resume the queue"], { class: "btn primary", "data-action": "resume-queue" }, async () => { await api.resumeQueue(); toast("The queue starts runs again", "ok"); await loadQueue(); })
        : actionButton([icon("stop"), "Pause the queue"], { class: "btn", "data-action": "pause-queue", title: "Start no new run until resumed (runs in flight go on)" }, async () => { await api.pauseQueue(); toast("The queue is paused: new runs wait", "ok"); await loadQueue(); }));
    }
    replace(this.actions, act);
    replace(this.state, h("div", { class: `queue-state${q.paused ? " paused" : ""}`, "data-paused": String(q.paused) },
      q.draining ? [icon("warn"), h("b", null, "The server is shutting down: "), "running runs finish, waiting ones stay queued for its next start."]
        : q.paused ? [icon("warn"), h("b", null, "Paused"), q.paused_at ? ` since ${fmtTime(q.paused_at)} (${fmtAgo(q.paused_at)})` : "", ": runs in flight go on, new ones wait until it is resumed (kept across restarts)."]
          : [h("b", null, "Running"), ` · up to ${plural(q.max_runs, "run")} at once; the rest wait in order.`]));
    const table = (runs, waiting) => h("div", { class: "table-card" }, h("table", { class: "table" },
      h("thead", null, h("tr", null, waiting ? h("th", { class: "num" }, "#") : null, h("th", null, "Run"), h("th", null, "Command"), h("th", null, "Trigger"), h("th", null, waiting ? "Waiting since" : "Accepted"), waiting && !readOnly() ? h("th", null, "") : null)),
      h("tbody", null, runs.map((r) => h("tr", { class: "queue-row", "data-run": r.run_id },
        waiting ? h("td", { class: "num" }, String(r.position)) : null,
        h("td", null, waiting ? null : h("span", { class: "spinner xs" }), " ", h("a", { class: "mono", href: `#/runs/${r.run_id}` }, r.run_id)),
        h("td", { class: "mono small ellipsis" }, `barca ${r.command} ${r.targets.map((t) => splitId(t).name).join(", ") || "(every asset)"}`),
        h("td", null, h("span", { class: `tag trig-${r.triggered_by}` }, r.triggered_by)),
        h("td", { class: "small", title: fmtTime(r.accepted_at) }, fmtAgo(r.accepted_at)),
        waiting && !readOnly() ? h("td", null, actionButton("Cancel", { class: "btn sm danger", "data-action": "cancel-waiting" }, async () => { await api.cancel(r.run_id); await loadQueue(); })) : null)))));
    replace(this.running, h("div", { class: "section-head" }, h("h3", null, "Running"), h("span", { class: "subtle num" }, String(q.running.length))),
      q.running.length ? table(q.running, false) : h("p", { class: "subtle small" }, "No run is running."));
    replace(this.waiting, h("div", { class: "section-head" }, h("h3", null, "Waiting"), h("span", { class: "subtle num" }, String(q.queued.length))),
      q.queued.length ? table(q.queued, true) : h("p", { class: "subtle small" }, q.paused ? "No run waits yet: new runs will, until the queue is resumed." : "No run waits for a slot."));
  }
}
