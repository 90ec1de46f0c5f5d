// One key of a node (or an unpartitioned node's one result): a preview of its stored value
// and its attempts, newest first, each linked to its run and, failed, with its error and the
// user's frames of its traceback. Shown in the node panel (#/assets/<id>/key/<label>, and
// #/assets/<id>/result for an unpartitioned node).

import { api } from "./api.js";
import { h, replace, icon } from "./util.js";
import { fmtInt, fmtDur, fmtAgo, fmtTime, plural } from "./format.js";

/** The address of a key's page ("" for an unpartitioned node's result). */
export function keyHref(nodeId, key) {
  const node = `#/assets/${encodeURIComponent(nodeId)}`;
  return key ? `${node}/key/${encodeURIComponent(key)}` : `${node}/result`;
}

/** A failed attempt's error and traceback, as a block (shared with the run page). */
export function errorBlock(attempt) {
  const head = `${attempt.error_type ? `${attempt.error_type}: ` : ""}${attempt.error_message || "(no message)"}`;
  return h("div", { class: "error-block" },
    h("div", { class: "error-head" }, head),
    attempt.error_traceback ? h("pre", { class: "error-pre traceback" }, attempt.error_traceback.trimEnd())
      : h("div", { class: "small subtle" }, attempt.worker_exit ? `the worker exited: ${attempt.worker_exit}` : "no traceback was recorded (the step's own code did not raise)"));
}

export class KeyView {
  constructor(root) {
    this.root = root;
    this.seq = 0;
  }

  async show(nodeId, key) {
    const seq = ++this.seq;
    this.nodeId = nodeId;
    this.key = key;
    const back = key ? h("a", { href: `#/assets/${encodeURIComponent(nodeId)}/keys`, class: "small" }, icon("back"), "All keys") : null;
    this.valueBox = h("div", { class: "panel-section value-section" }, h("div", { class: "skeleton-block" }));
    this.attemptsBox = h("div", { class: "panel-section attempts-section" }, h("div", { class: "skeleton-block" }));
    replace(this.root,
      h("div", { class: "panel-section key-head" }, back,
        h("h3", { class: "mono key-title" }, key || "Result")),
      this.valueBox, this.attemptsBox);
    const [attempts, value] = await Promise.allSettled([api.attempts(nodeId, key), api.value(nodeId, key)]);
    if (seq !== this.seq) return;
    this.paintValue(value);
    this.paintAttempts(attempts);
  }

  paintValue(res) {
    const head = h("div", { class: "section-head" }, h("h3", null, "Value"));
    if (res.status === "rejected") { replace(this.valueBox, head, h("div", { class: "error-box" }, icon("warn"), res.reason.message)); return; }
    const v = res.value;
    const meta = v.run_id ? h("span", { class: "small subtle" }, `${v.format}${v.size_bytes != null ? ` · ${plural(v.size_bytes, "byte")}` : ""} · run `,
      h("a", { class: "mono", href: `#/runs/${v.run_id}` }, v.run_id), ` · ${fmtAgo(v.created_at)}`) : null;
    head.append(h("div", { class: "spacer" }), meta || "");
    let body;
    if (v.kind === "json") {
      body = [h("pre", { class: "code value-json" }, v.text), v.truncated ? h("p", { class: "small subtle" }, "… the rest is cut: the value is longer than the preview shows.") : null];
    } else if (v.kind === "table") {
      body = [h("div", { class: "small subtle" }, `${plural(v.num_rows, "row")} × ${plural(v.columns.length, "column")}${v.num_rows > v.rows.length ? ` · the first ${fmtInt(v.rows.length)}` : ""}`),
        h("div", { class: "table-card scroll-x" }, h("table", { class: "table compact value-table" },
          h("thead", null, h("tr", null, v.columns.map((c) => h("th", null, c)))),
          h("tbody", null, v.rows.map((r) => h("tr", null, r.map((c) => h("td", { class: "mono small" }, c)))))))];
    } else {
      body = h("p", { class: "subtle small" }, v.reason || "No preview.");
    }
    replace(this.valueBox, head, body);
  }

  paintAttempts(res) {
    const head = h("div", { class: "section-head" }, h("h3", null, "Attempts"), h("span", { class: "subtle small" }, "newest first"));
    if (res.status === "rejected") { replace(this.attemptsBox, head, h("div", { class: "error-box" }, icon("warn"), res.reason.message)); return; }
    const list = res.value.attempts;
    if (!list.length) { replace(this.attemptsBox, head, h("p", { class: "subtle small" }, "No attempt recorded yet.")); return; }
    replace(this.attemptsBox, head, h("ol", { class: "attempts" }, list.map((a) => h("li", { class: `attempt${a.status === "failed" ? " is-failed" : ""}`, "data-run": a.run_id },
      h("div", { class: "attempt-line" },
        h("span", { class: `badge sm tone-${a.status === "success" ? "ok" : a.status === "failed" ? "failed" : "never"}` }, h("i", { class: "dot" }), a.status),
        h("a", { class: "mono run-link", href: `#/runs/${a.run_id}`, title: "This attempt's run" }, `run ${a.run_id}`),
        h("span", { class: "small subtle", title: fmtTime(a.created_at) }, fmtAgo(a.created_at)),
        h("span", { class: "small subtle num" }, fmtDur(a.elapsed_seconds)),
        a.attempts > 1 ? h("span", { class: "small subtle" }, `after ${plural(a.attempts - 1, "retry", "retries")}`) : null),
      a.status === "failed" ? errorBlock(a) : null))));
  }
}
