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

async function call(method, path, { body, signal } = {}) {
  let res;
  try {
    res = await fetch(apiUrl(path), {
      method, signal, cache: "no-store",
      headers: body === undefined ? { accept: "application/json" }
        : { accept: "application/json", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, { error: "the server cannot be reached", remediation: "is `barca serve` still running?" });
  }
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
  start: (request) => call("POST", "runs", { body: request }),
  cancel: (id) => call("DELETE", `runs/${encodeURIComponent(id)}`),
  events: (id) => new EventSource(apiUrl(`runs/${encodeURIComponent(id)}/events`)),
};
