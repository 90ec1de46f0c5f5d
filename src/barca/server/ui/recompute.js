// "Recompute" of a partitioned node: a dialog that asks which keys (all, the failed ones, the
// ones a search finds), counts them with a dry run of the very request it would start, and
// starts it only from a button that says that count ("Recompute 200,000 keys"). The choice's
// logic is in selection.js.

import { api } from "./api.js";
import { store, follow } from "./store.js";
import { h, replace, icon, debounce, toast } from "./util.js";
import { fmtInt, plural } from "./format.js";
import { selectionOf, fits, recomputeRequest, countOf, confirmText } from "./selection.js";

const PAGE = 500;          // keys a page of /assets/{id}/partitions gives at most
const MAX_NAMED = 20_000;  // keys gathered to be named in one request, at most

/** Every key label matching `filter` (status and/or q), page by page; null past `MAX_NAMED`. */
async function matchingKeys(id, filter, signal) {
  const out = [];
  let offset = 0;
  for (;;) {
    const page = await api.partitions(id, { ...filter, offset, limit: PAGE }, { signal });
    if (page.matched > MAX_NAMED) return { keys: null, matched: page.matched };
    out.push(...page.keys.map((k) => k.key));
    if (page.next_offset == null) return { keys: out, matched: page.matched };
    offset = page.next_offset;
  }
}

export function openRecompute(asset) {
  const entry = store.state ? store.state.get(asset.id) : null;
  const parts = entry && entry.partitions;
  let choice = "all", seq = 0, abort = null, request = null;

  const count = (n) => h("span", { class: "choice-count num" }, n == null ? "" : fmtInt(n));
  const radio = (value, label, n, extra = null) => h("label", { class: "choice", "data-choice": value },
    h("input", { type: "radio", name: "recompute-keys", value, checked: value === choice, onchange: () => pick(value) }),
    h("span", { class: "choice-label" }, label), extra, count(n));
  const search = h("input", {
    type: "search", class: "search-input", placeholder: "part of a key, e.g. r0012", "aria-label": "Keys containing",
    oninput: debounce(() => pick("search"), 300), onfocus: () => { if (choice !== "search") pick("search"); },
  });
  const note = h("div", { class: "recompute-note", role: "status" });
  const confirm = h("button", { type: "button", class: "btn primary", "data-action": "confirm-recompute", disabled: true }, "Recompute");
  const cancel = h("button", { type: "button", class: "btn", "data-action": "cancel-recompute" }, "Cancel");
  const choices = h("fieldset", { class: "choices" }, h("legend", { class: "small subtle" }, "Keys to run again, even if cached"),
    radio("all", "All keys", parts ? parts.total : null),
    radio("failed", "Failed keys", parts ? parts.failed : null),
    radio("search", "Keys containing", null, h("span", { class: "search grow" }, icon("search"), search)));
  const dialog = h("div", { class: "modal", role: "dialog", "aria-modal": "true", "aria-labelledby": "recompute-title" },
    h("h2", { id: "recompute-title" }, `Recompute ${asset.name}`),
    h("p", { class: "subtle small" }, "Every chosen key runs again, cached or not. The count below is the server's, from a dry run of the same request."),
    choices, note, h("div", { class: "modal-actions" }, cancel, confirm));
  const backdrop = h("div", { class: "modal-backdrop", onclick: (e) => { if (e.target === backdrop) close(); } }, dialog);
  // captured, so that the page's own Escape (which closes the node's panel) does not run too
  const keys = (e) => { if (e.key === "Escape") { e.stopPropagation(); close(); } };

  function close() {
    if (abort) abort.abort();
    document.removeEventListener("keydown", keys, true);
    backdrop.remove();
  }

  function say(kind, ...text) {
    note.dataset.kind = kind;
    replace(note, kind === "counting" ? h("span", { class: "spinner xs" }) : kind === "error" || kind === "warn" ? icon("warn") : null, ...text);
  }

  async function pick(value) {
    choice = value;
    for (const input of choices.querySelectorAll("input[type=radio]")) input.checked = input.value === value;
    const mine = ++seq;
    if (abort) abort.abort();
    abort = new AbortController();
    request = null;
    confirm.disabled = true;
    replace(confirm, "Recompute");
    const q = search.value.trim();
    if (value === "search" && !q) { say("info", "Type part of a key: the keys that contain it (and have run once) are chosen."); return; }
    say("counting", value === "all" ? "Counting the keys…" : "Finding the keys…");
    try {
      let selection = null, chosen = null;
      if (value !== "all") {
        const found = await matchingKeys(asset.id, value === "failed" ? { status: "failed" } : { q }, abort.signal);
        if (mine !== seq) return;
        const label = choices.querySelector(`[data-choice=${value}] .choice-count`);
        label.textContent = value === "search" ? `${fmtInt(found.matched)} match` : fmtInt(found.matched);
        if (found.keys === null) {
          say("warn", `${plural(found.matched, "key")}: more than one run can name (${fmtInt(MAX_NAMED)}). Recompute all keys, or narrow the search.`);
          return;
        }
        if (!found.keys.length) { say("info", value === "failed" ? "No key failed its last attempt." : "No key matches."); return; }
        const named = selectionOf(found.keys);
        if (!named || !fits(named.selection)) {
          say("warn", `These ${plural(found.keys.length, "key")} are too many to name in one run. Recompute all keys, or narrow the search.`);
          return;
        }
        selection = named.selection;
        chosen = found.keys.length;
        say("counting", `Counting what recomputing ${plural(chosen, "key")} runs…`);
      }
      const dry = await api.start(recomputeRequest(asset.id, selection, true));
      if (mine !== seq) return;
      const counted = countOf(dry, asset.id);
      request = recomputeRequest(asset.id, selection);
      confirm.disabled = counted.keys + counted.others === 0;
      replace(confirm, confirmText(counted));
      confirm.dataset.keys = String(counted.keys);
      const extra = chosen != null && counted.keys > chosen
        ? ` The run names keys by each dimension's values: it takes every combination of them, ${fmtInt(counted.keys)} keys for the ${fmtInt(chosen)} chosen.`
        : "";
      say(counted.keys >= 10_000 ? "warn" : "info", `${plural(counted.keys, "key")} of ${asset.name} will run again.${extra}`);
    } catch (err) {
      if (err.name === "AbortError" || mine !== seq) return;
      say("error", `Cannot count: ${err.message}${err.remediation ? ` — ${err.remediation}` : ""}`);
    }
  }

  cancel.addEventListener("click", close);
  confirm.addEventListener("click", async () => {
    if (!request) return;
    confirm.disabled = true;
    try {
      const res = await api.start(request);
      close();
      follow(res.run_id);
      toast(`Run ${res.run_id} started`, "ok");
      location.hash = `#/runs/${res.run_id}`;
    } catch (err) {
      confirm.disabled = false;
      say("error", `${err.message}${err.remediation ? ` — ${err.remediation}` : ""}`);
    }
  });
  document.addEventListener("keydown", keys, true);
  document.body.append(backdrop);
  confirm.focus();
  pick("all");
}
