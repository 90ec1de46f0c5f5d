// The server's API, addressed relative to this module: the UI is served at <prefix>/ui/ and the
// API at <prefix>/, so the UI works under any path prefix behind a proxy. No URL here starts
// with "/".

const BASE = new URL("../", import.meta.url);

export function apiUrl(path) {
  return new URL(path, BASE).toString();
}

/** A node id as a path segment: each "/"-separated part escaped, the "/" kept (the route's
 * {name:path} takes them). */
export function nodePath(id) {
  return id.split("/").map(encodeURIComponent).join("/");
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
  get remediation() { return this.body.remediation || ""; }
}

// A server started with a token (`barca serve --token`, BARCA_SERVE_TOKEN) answers 401 until
// the request carries it: the UI asks once and keeps it in this tab's session storage (never
// in a URL, gone with the tab).
const TOKEN_KEY = "barca.token";

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

export function authHeaders(extra = {}) {
  const t = token();
  return t ? { ...extra, authorization: `Bearer ${t}` } : extra;
}

let asking = null;  // one prompt for every request that met a 401 at once

/** Show the token form; resolves once a token was entered (and stored). */
export function askToken(wrong) {
  if (!asking) {
    asking = new Promise((resolve) => {
      const form = document.getElementById("token-form");
      const input = form.querySelector("input");
      form.querySelector(".token-wrong").hidden = !wrong;
      form.hidden = false;
      input.value = "";
      input.focus();
      form.onsubmit = (e) => {
        e.preventDefault();
        if (!input.value.trim()) return;
        try { sessionStorage.setItem(TOKEN_KEY, input.value.trim()); } catch { /* private mode */ }
        form.hidden = true;
        asking = null;
        resolve();
      };
    });
  }
  return asking;
}

async function send(method, path, { body, signal, headers = {} } = {}) {
  const base = body === undefined ? { accept: "application/json" }
    : { accept: "application/json", "content-type": "application/json" };
  try {
    return await fetch(apiUrl(path), {
      method, signal, cache: "no-store", headers: authHeaders({ ...base, ...headers }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, { error: "the server cannot be reached", remediation: "is `barca serve` still running?" });
  }
}

/** fetch with the token; on 401 ask for it and try again. */
export async function authorized(method, path, options) {
  let res = await send(method, path, options);
  while (res.status === 401) {
    await askToken(token() !== "");
    res = await send(method, path, options);
  }
  return res;
}

async function call(method, path, options) {
  const res = await authorized(method, path, options);
  let data = null;
  if (res.status !== 204) {
    try { data = await res.json(); } catch { data = null; }
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

export const api = {
  health: (o) => call("GET", "health", o),
  assets: (o) => call("GET", "assets", o),
  state: (o) => call("GET", "state", o),
  schedule: (o) => call("GET", "schedule", o),
  runs: (limit = 50, o) => call("GET", `runs?limit=${limit}`, o),
  run: (id, o) => call("GET", `runs/${encodeURIComponent(id)}`, o),
  logs: (id, o) => call("GET", `logs/${encodeURIComponent(id)}`, o),
  asset: (id, o) => call("GET", `assets/${nodePath(id)}`, o),
  partitions(id, { status = "", q = "", error = null, offset = 0, limit = 100 } = {}, o) {
    const p = new URLSearchParams({ offset: String(offset), limit: String(limit) });
    if (status) p.set("status", status);
    if (q) p.set("q", q);
    if (error != null) p.set("error", error);
    return call("GET", `assets/${nodePath(id)}/partitions?${p}`, o);
  },
  /** A key's attempts, newest first (`key` "" for an unpartitioned node; `run`: that run's). */
  attempts(id, key = "", { run = "", limit = 20 } = {}, o) {
    const p = new URLSearchParams({ limit: String(limit) });
    if (key) p.set("key", key);
    if (run) p.set("run", run);
    return call("GET", `assets/${nodePath(id)}/attempts?${p}`, o);
  },
  value: (id, key = "", o) => call("GET", `assets/${nodePath(id)}/value${key ? `?key=${encodeURIComponent(key)}` : ""}`, o),
  start: (request) => call("POST", "runs", { body: request }),
  cancel: (id) => call("DELETE", `runs/${encodeURIComponent(id)}`),
  /** A scheduled job: its next fires and the last runs its fires started. */
  jobFires: (id, { next = 5, runs = 10 } = {}, o) => call("GET", `schedule/${nodePath(id)}/fires?next=${next}&runs=${runs}`, o),
  /** Pause a job until resumed, or until `until` (RFC 3339). */
  pauseJob: (id, until = null) => call("POST", `schedule/${nodePath(id)}/pause${until ? `?until=${encodeURIComponent(until)}` : ""}`),
  resumeJob: (id) => call("POST", `schedule/${nodePath(id)}/resume`),
  fireJob: (id) => call("POST", `schedule/${nodePath(id)}/fire`),
  queue: (o) => call("GET", "queue", o),
  pauseQueue: () => call("POST", "queue/pause"),
  resumeQueue: () => call("POST", "queue/resume"),
  events: (id) => new EventStream(`runs/${encodeURIComponent(id)}/events`),
};

/** A server-sent event stream read with fetch, so that it carries the token (EventSource
 * sends no headers). As EventSource: `onmessage` per event, reconnects after a broken
 * stream with Last-Event-ID, stops (CLOSED, then `onerror`) when the server answers 204. */
export class EventStream {
  static CLOSED = 2;

  constructor(path) {
    this.path = path;
    this.lastId = "";
    this.readyState = 0;
    this.onmessage = null;
    this.onerror = null;
    this.abort = new AbortController();
    this.loop();
  }

  close() { this.readyState = EventStream.CLOSED; this.abort.abort(); }

  async loop() {
    let pause = 500;
    while (this.readyState !== EventStream.CLOSED) {
      try {
        const headers = this.lastId ? { "last-event-id": this.lastId } : {};
        const res = await authorized("GET", this.path, { signal: this.abort.signal, headers });
        if (res.status === 204 || (res.status >= 400 && res.status < 500)) break;
        if (res.ok && res.body) {
          this.readyState = 1;
          pause = 500;
          await this.read(res.body.getReader());
        }
      } catch (err) {
        if (err.name === "AbortError") return;
      }
      if (this.readyState === EventStream.CLOSED) return;
      this.readyState = 0;
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, 5000);
    }
    this.readyState = EventStream.CLOSED;
    if (this.onerror) this.onerror();
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        this.dispatch(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
  }

  dispatch(block) {
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("id:")) this.lastId = line.slice(3).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length && this.onmessage) this.onmessage({ data: data.join("\n") });
  }
}
