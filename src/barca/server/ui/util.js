// Small DOM helpers (formatting is in format.js). Every text from the server goes in as a text
// node, never as HTML: keys, errors and log lines are written by pipelines.

const SVG_NS = "http://www.w3.org/2000/svg";

function setProps(el, props, isSvg) {
  if (!props) return;
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === "class") isSvg ? el.setAttribute("class", v) : (el.className = v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (!isSvg && (k === "value" || k === "checked" || k === "disabled" || k === "hidden")) el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
}

function appendAll(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false || c === "") continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** h("div", {class: "x", onclick: fn}, child, "text", [more]) */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props, false);
  appendAll(el, children);
  return el;
}

export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props, true);
  appendAll(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  appendAll(el, children);
  return el;
}

export function debounce(fn, ms) {
  let t;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

/** Calls fn at most once per animation frame (and at most every `ms`). */
export function throttleFrame(fn, ms = 0) {
  let queued = false, last = 0;
  return () => {
    if (queued) return;
    queued = true;
    const wait = Math.max(0, last + ms - performance.now());
    setTimeout(() => requestAnimationFrame(() => { queued = false; last = performance.now(); fn(); }), wait);
  };
}

export function icon(name, cls = "") {
  const paths = ICONS[name] || "";
  const el = s("svg", { class: `icon ${cls}`, viewBox: "0 0 24 24", "aria-hidden": "true" });
  el.innerHTML = paths; // constant markup from ICONS below, never server text
  return el;
}

const ICONS = {
  play: '<path d="M8 5.5v13l10.5-6.5z" fill="currentColor" stroke="none"/>',
  stop: '<rect x="6.5" y="6.5" width="11" height="11" rx="1.5" fill="currentColor" stroke="none"/>',
  close: '<path d="M6 6l12 12M18 6 6 18"/>',
  back: '<path d="M15 5l-7 7 7 7"/>',
  chevL: '<path d="M15 5l-7 7 7 7"/>',
  chevR: '<path d="M9 5l7 7-7 7"/>',
  chevD: '<path d="M6 9l6 6 6-6"/>',
  search: '<circle cx="11" cy="11" r="6.5"/><path d="M20 20l-4.2-4.2"/>',
  plus: '<path d="M12 5v14M5 12h14"/>',
  minus: '<path d="M5 12h14"/>',
  fit: '<path d="M4 9V4h5M20 9V4h-5M4 15v5h5M20 15v5h-5"/>',
  graph: '<circle cx="5" cy="6" r="2"/><circle cx="5" cy="18" r="2"/><circle cx="19" cy="12" r="2"/><path d="M7 7l10 4M7 17l10-4"/>',
  list: '<path d="M9 6h11M9 12h11M9 18h11"/><circle cx="4.5" cy="6" r="1" fill="currentColor"/><circle cx="4.5" cy="12" r="1" fill="currentColor"/><circle cx="4.5" cy="18" r="1" fill="currentColor"/>',
  asset: '<ellipse cx="12" cy="6" rx="7" ry="2.5"/><path d="M5 6v12c0 1.4 3.1 2.5 7 2.5s7-1.1 7-2.5V6M5 12c0 1.4 3.1 2.5 7 2.5s7-1.1 7-2.5"/>',
  task: '<path d="M13 3 5 13.5h6L10 21l8-10.5h-6z"/>',
  sensor: '<circle cx="12" cy="12" r="2"/><path d="M8.5 8.5a5 5 0 0 0 0 7M15.5 8.5a5 5 0 0 1 0 7M5.6 5.6a9 9 0 0 0 0 12.8M18.4 5.6a9 9 0 0 1 0 12.8"/>',
  clock: '<circle cx="12" cy="12" r="8.5"/><path d="M12 7.5V12l3 2"/>',
  warn: '<path d="M12 4 2.8 19.5h18.4z"/><path d="M12 10v4.5M12 17.2v.3"/>',
  refresh: '<path d="M19.5 12a7.5 7.5 0 1 1-2.2-5.3M19.5 4.5v4h-4"/>',
  external: '<path d="M14 5h5v5M19 5l-8 8M17 14v5H5V7h5"/>',
  copy: '<rect x="8" y="8" width="11" height="11" rx="2"/><path d="M5 15V6a1 1 0 0 1 1-1h9"/>',
};

export function toast(text, kind = "info", action = null) {
  const box = document.getElementById("toasts");
  const el = h("div", { class: `toast toast-${kind}`, role: "status" }, h("span", null, text), action);
  box.append(el);
  setTimeout(() => { el.classList.add("leaving"); setTimeout(() => el.remove(), 300); }, kind === "error" ? 8000 : 4500);
}
