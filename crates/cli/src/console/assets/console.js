// leaderlock console: every string from the server (other roles' keys,
// ids, values, job names) goes into the page as a text node, never as
// markup. Notifications are hints: on one, the view reads its data again
// from the server, at most every REFRESH_MS.
"use strict";

const REFRESH_MS = 250;
const SVG = "http://www.w3.org/2000/svg";

let config = { writes: false };
let view = null; // { name, arg, refresh(), wants(hint) }
let offset = 0; // server's lease clock minus this browser's clock, seconds
let pending = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function serverNow() {
  return Date.now() / 1000 + offset;
}

function iso(t) {
  return t == null ? "" : new Date(t * 1000).toISOString().replace(".000Z", "Z");
}

function seconds(s) {
  if (s == null) return "";
  if (s < 0) s = 0;
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  return (s / 3600).toFixed(1) + " h";
}

function showError(message) {
  const f = document.getElementById("error");
  f.textContent = message;
  f.hidden = !message;
}

async function get(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error + (body.sqlstate ? " (" + body.sqlstate + ")" : ""));
  if (typeof body.now === "number") offset = body.now - Date.now() / 1000;
  return body;
}

async function post(path, body, question) {
  if (!window.confirm(question)) return;
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Leaderlock-Console": "1" },
    body: JSON.stringify(body),
  });
  const answer = await r.json();
  if (!r.ok) showError(answer.error + (answer.sqlstate ? " (" + answer.sqlstate + ")" : ""));
  else showError("");
  refreshSoon();
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))), el("tbody", {}, ...rows));
}

// Cells whose time left ticks: data-expires holds the instant (lease clock).
function ticking(expiresAt) {
  return el("td", { class: "left", "data-expires": expiresAt == null ? "" : String(expiresAt) });
}

function tick() {
  for (const td of document.querySelectorAll("[data-expires]")) {
    const at = td.getAttribute("data-expires");
    td.textContent = at === "" ? "" : seconds(Number(at) - serverNow());
  }
}

// ---- keys ----

function keysView(params) {
  const prefix = params.get("prefix") || "";
  const after = params.get("after") || "";
  const input = el("input", { id: "prefix", placeholder: "key prefix", value: prefix });
  const go = () => { location.hash = "#/keys?prefix=" + encodeURIComponent(input.value); };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
  const body = el("div", { id: "keys" });
  const next = el("button", { id: "next", hidden: "" }, "next page");
  const root = el("div", {}, el("div", { class: "toolbar" }, input, el("button", { onclick: go }, "filter"),
    after ? el("a", { href: "#/keys?prefix=" + encodeURIComponent(prefix) }, "first page") : "", next), body);
  let shown = new Set();
  return {
    root,
    async refresh() {
      const data = await get("/api/keys?limit=100&prefix=" + encodeURIComponent(prefix) + "&after=" + encodeURIComponent(after));
      shown = new Set(data.rows.map((r) => r.key));
      const rows = data.rows.map((r) => el("tr", { "data-key": r.key },
        el("td", { class: "mono key" }, el("a", { href: "#/key/" + encodeURIComponent(r.key) }, r.key)),
        el("td", { class: "state-" + r.state }, r.state),
        el("td", { class: "mono holder" }, r.holder),
        el("td", {}, r.term),
        ticking(r.state === "held" ? r.expires_at : null),
        el("td", {}, r.slots > 1 ? r.slot + "/" + r.slots : ""),
        el("td", { class: "mono" }, r.value),
        el("td", { class: "mono" }, r.session),
        el("td", {}, r.owner),
        el("td", {}, config.writes && r.state === "held"
          ? el("button", { class: "release", onclick: () => post("/api/release", { key: r.key }, "Force-release key " + JSON.stringify(r.key) + "?") }, "force release")
          : "")));
      body.replaceChildren(rows.length ? table(["key", "state", "holder", "term", "left", "slot", "value", "session", "owner", ""], rows)
        : el("p", { class: "muted" }, "no keys" + (prefix ? " starting with this prefix" : "")));
      next.hidden = !data.next;
      next.onclick = () => { location.hash = "#/keys?prefix=" + encodeURIComponent(prefix) + "&after=" + encodeURIComponent(data.next); };
      tick();
    },
    wants(hint) {
      return shown.has(hint.key) || (hint.event === "acquired" && hint.key.startsWith(prefix) && hint.key > after);
    },
  };
}

// ---- one key: holders, candidates, timeline ----

function tenures(history, now) {
  const open = new Map(); // term -> tenure
  const bars = [], expiries = [], leaderless = [];
  let gap = null;
  for (const h of history) {
    const p = h.payload || {};
    if (h.event === "acquired" && h.term != null) {
      if (!open.has(h.term)) open.set(h.term, { holder: h.holder, term: h.term, start: h.at, end: null, slot: p.slot });
    } else if ((h.event === "released" || h.event === "expired") && h.term != null) {
      const t = open.get(h.term) || { holder: h.holder, term: h.term, start: h.at, slot: p.slot };
      t.end = h.at;
      t.why = h.event === "expired" ? "expired" + (p.reason ? " (" + p.reason + ")" : "") : (p.forced ? "force-released" : "released");
      open.delete(h.term);
      bars.push(t);
      if (h.event === "expired") expiries.push(h.at);
    } else if (h.event === "leaderless") {
      gap = { start: typeof p.since === "string" ? Date.parse(p.since) / 1000 : h.at, end: null };
    } else if (h.event === "leaderless_end" && gap) {
      gap.end = h.at;
      leaderless.push(gap);
      gap = null;
    }
  }
  for (const t of open.values()) bars.push(t);
  if (gap) leaderless.push(gap);
  bars.sort((a, b) => a.start - b.start);
  // lanes: a tenure takes the first lane free at its start (many slots)
  const lanes = [];
  for (const b of bars) {
    let i = lanes.findIndex((end) => end !== null && end <= b.start);
    if (i < 0) { i = lanes.length; lanes.push(null); }
    b.lane = i;
    lanes[i] = b.end === null ? null : b.end;
    if (b.end === null) lanes[i] = Infinity;
  }
  return { bars, expiries, leaderless, lanes: Math.max(lanes.length, 1), now };
}

function timeline(data, windowState) {
  const t = tenures(data.history, serverNow());
  const first = data.history.length ? data.history[0].at : t.now - 60;
  const all = [first - 1, t.now + 1];
  let [from, to] = windowState.range || all;
  const width = 1000, lane = 28, top = 20, height = top + t.lanes * lane + 24;
  const x = (at) => ((Math.min(Math.max(at, from), to) - from) / (to - from)) * width;
  const root = svg("svg", { class: "timeline", viewBox: `0 0 ${width} ${height}`, role: "img" });
  for (const g of t.leaderless) {
    const end = g.end == null ? t.now : g.end;
    if (end < from || g.start > to) continue;
    root.append(svg("rect", { class: "leaderless", x: x(g.start), y: 0, width: Math.max(x(end) - x(g.start), 1), height: height - 20,
      "data-start": g.start, "data-end": g.end == null ? "" : g.end }));
  }
  for (const b of t.bars) {
    const end = b.end == null ? t.now : b.end;
    if (end < from || b.start > to) continue;
    const y = top + b.lane * lane;
    const rect = svg("rect", { class: "tenure" + (b.end == null ? " open" : ""), x: x(b.start), y, width: Math.max(x(end) - x(b.start), 1), height: lane - 8,
      "data-term": b.term });
    rect.append(svg("title", {}, b.holder + " term " + b.term + ": " + iso(b.start) + " to " + (b.end == null ? "now" : iso(b.end) + ", " + b.why)));
    root.append(rect);
    root.append(svg("text", { x: x(b.start) + 3, y: y + lane - 13 }, b.holder + " #" + b.term));
  }
  for (const at of t.expiries) {
    if (at < from || at > to) continue;
    root.append(svg("line", { class: "expiry", x1: x(at), x2: x(at), y1: 0, y2: height - 20, "data-at": at }));
  }
  // a hand-over: a tenure released and the next one begun within a second
  for (const b of t.bars) {
    if (b.end == null || b.why !== "released") continue;
    const next = t.bars.find((n) => n !== b && n.start >= b.end && n.start - b.end < 1);
    if (!next || b.end < from || b.end > to) continue;
    const line = svg("line", { class: "handover", x1: x(b.end), x2: x(b.end), y1: 0, y2: height - 20, "data-at": b.end });
    line.append(svg("title", {}, "handed over from " + b.holder + " #" + b.term + " to " + next.holder + " #" + next.term));
    root.append(line);
  }
  for (let i = 0; i <= 4; i++) {
    const at = from + ((to - from) * i) / 4;
    root.append(svg("text", { class: "axis", x: Math.min(x(at), width - 110), y: height - 6 }, iso(Math.round(at))));
  }
  const zoom = (factor) => {
    const mid = (from + to) / 2, half = ((to - from) / 2) * factor;
    windowState.range = [mid - half, mid + half];
    windowState.redraw();
  };
  const tools = el("div", { class: "toolbar" },
    el("button", { onclick: () => zoom(0.5), title: "zoom in" }, "+"),
    el("button", { onclick: () => zoom(2), title: "zoom out" }, "−"),
    el("button", { onclick: () => { windowState.range = null; windowState.redraw(); } }, "all"),
    el("span", { class: "muted" }, t.bars.length + " tenures, " + t.expiries.length + " expiries, " + t.leaderless.length + " leaderless intervals"),
    el("span", { class: "legend" }, el("span", { class: "key-expiry" }, "│ expiry"), " ", el("span", { class: "key-handover" }, "│ hand-over"), " ",
      el("span", { class: "key-leaderless" }, "▮ leaderless")));
  return el("div", { id: "timeline" }, tools, root);
}

function keyView(key) {
  const body = el("div", {});
  const root = el("div", {}, el("h2", {}, "key ", el("span", { class: "mono", id: "key-name" }, key)), body);
  let last = null;
  const windowState = { range: null, redraw: () => last && draw(last) };
  const draw = (data) => {
    const holders = data.holders.map((r) => el("tr", {},
      el("td", {}, r.slots > 1 ? r.slot + "/" + r.slots : ""),
      el("td", { class: "state-" + r.state }, r.state),
      el("td", { class: "mono holder" }, r.holder), el("td", {}, r.term), ticking(r.state === "held" ? r.expires_at : null),
      el("td", { class: "mono" }, r.value), el("td", { class: "mono" }, r.session), el("td", {}, r.owner)));
    const candidates = data.candidates.map((c) => el("tr", {}, el("td", { class: "mono" }, c.id), el("td", {}, c.priority), el("td", {}, iso(c.waiting_since))));
    const recent = data.history.slice(-50).reverse().map((h) => el("tr", {},
      el("td", {}, iso(h.at)), el("td", { class: "event" }, h.event), el("td", { class: "mono" }, h.holder), el("td", {}, h.term),
      el("td", { class: "mono" }, h.payload && (h.payload.reason || (h.payload.forced ? "forced" : "") || h.payload.outcome || ""))));
    body.replaceChildren(
      holders.length ? table(["slot", "state", "holder", "term", "left", "value", "session", "owner"], holders) : el("p", { class: "muted" }, "no such key"),
      el("h2", {}, "leadership timeline"), timeline(data, windowState),
      el("h2", {}, "waiting candidates"), candidates.length ? table(["id", "priority", "waiting since"], candidates) : el("p", { class: "muted" }, "none"),
      el("h2", {}, "latest transitions"), table(["at", "event", "holder", "term", "detail"], recent));
    tick();
  };
  return {
    root,
    async refresh() {
      last = await get("/api/key?key=" + encodeURIComponent(key));
      draw(last);
    },
    wants(hint) { return hint.key === key; },
  };
}

// ---- jobs ----

function jobsView() {
  const body = el("div", {});
  return {
    root: el("div", {}, body),
    async refresh() {
      const data = await get("/api/jobs");
      const rows = data.jobs.map((j) => el("tr", { "data-job": j.job },
        el("td", { class: "mono" }, j.job),
        el("td", {}, j.scheduled ? (j.every != null ? "every " + seconds(j.every) : j.cron + " " + j.tz) : "(no schedule)"),
        el("td", {}, j.overlap), el("td", {}, j.paused ? "paused" : ""),
        el("td", {}, ...j.upcoming.map((t) => el("div", { class: "upcoming" }, iso(t)))), el("td", {}, j.overdue ? seconds(j.overdue) : ""),
        el("td", {}, j.last_outcome), el("td", {}, j.missed),
        el("td", {}, ...j.runs.map((r) => el("div", { class: "run" }, iso(r.due) + " ", el("span", { class: "outcome-" + (r.outcome || "running") }, r.outcome || (r.unfinished ? "running" : "")),
          r.holder ? " by " : "", el("span", { class: "mono" }, r.holder || "")))),
        el("td", {}, config.writes && j.scheduled
          ? el("button", { onclick: () => post(j.paused ? "/api/resume" : "/api/pause", { job: j.job }, (j.paused ? "Resume" : "Pause") + " the schedule of " + JSON.stringify(j.job) + "?") }, j.paused ? "resume" : "pause")
          : "")));
      body.replaceChildren(rows.length ? table(["job", "schedule", "overlap", "", "next due", "overdue", "last outcome", "missed", "latest runs", ""], rows)
        : el("p", { class: "muted" }, "no jobs"));
    },
    wants(hint) { return hint.event.startsWith("run_"); },
  };
}

// ---- sessions ----

function sessionsView() {
  const body = el("div", {});
  return {
    root: el("div", {}, body),
    async refresh() {
      const data = await get("/api/sessions");
      const rows = data.sessions.map((s) => el("tr", {},
        el("td", { class: "mono" }, s.session), el("td", { class: "mono" }, s.id), ticking(s.expires_at), el("td", {}, seconds(s.ttl)),
        el("td", {}, s.pid), el("td", {}, s.owner),
        el("td", {}, String(s.keys), ...s.some_keys.map((k) => el("div", {}, el("a", { class: "mono", href: "#/key/" + encodeURIComponent(k) }, k))),
          s.keys > s.some_keys.length ? el("div", { class: "muted" }, "…") : ""),
        el("td", {}, config.writes ? el("button", { onclick: () => post("/api/close-session", { session: s.session }, "Close session " + s.session + "?") }, "close") : "")));
      body.replaceChildren(rows.length ? table(["session", "id", "left", "ttl", "pid", "owner", "keys", ""], rows) : el("p", { class: "muted" }, "no sessions"));
      tick();
    },
    wants() { return true; },
  };
}

// ---- groups ----

function groupsView() {
  const body = el("div", {});
  return {
    root: el("div", {}, body),
    async refresh() {
      const data = await get("/api/groups");
      const parts = data.groups.map((g) => el("section", {},
        el("h2", { class: "mono" }, g.group),
        el("p", {}, `${g.partitions} partitions: ${g.owned} owned, ${g.revoked} being given back, ${g.free} free; drain ${seconds(g.drain)}; owner ${g.owner}`),
        g.members.length ? table(["member", "left", "owns", "giving back", "partitions"], g.members.map((m) => el("tr", {},
          el("td", { class: "mono" }, m.member), ticking(m.expires_at), el("td", {}, String(m.owned)), el("td", {}, String(m.revoked)),
          el("td", { class: "mono" }, m.some_partitions.join(" "), m.owned + m.revoked > m.some_partitions.length ? " …" : ""))))
          : el("p", { class: "muted" }, "no members")));
      body.replaceChildren(...(parts.length ? parts : [el("p", { class: "muted" }, "no groups")]));
      tick();
    },
    wants(hint) { return hint.event.startsWith("partition_"); },
  };
}

// ---- routing and live updates ----

async function refreshNow() {
  pending = null;
  if (!view) return;
  try {
    await view.refresh();
    showError("");
  } catch (e) {
    showError(String(e.message || e));
  }
}

function refreshSoon() {
  if (pending === null) pending = setTimeout(refreshNow, REFRESH_MS);
}

function route() {
  const hash = location.hash || "#/keys";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  let name;
  if (path.startsWith("/key/")) {
    view = keyView(decodeURIComponent(path.slice(5)));
    name = "keys";
  } else if (path === "/jobs") {
    view = jobsView(); name = "jobs";
  } else if (path === "/sessions") {
    view = sessionsView(); name = "sessions";
  } else if (path === "/groups") {
    view = groupsView(); name = "groups";
  } else {
    view = keysView(params); name = "keys";
  }
  for (const n of ["keys", "jobs", "sessions", "groups"]) document.getElementById("nav-" + n).classList.toggle("current", n === name);
  document.getElementById("main").replaceChildren(view.root);
  refreshNow();
}

function live() {
  const badge = document.getElementById("live");
  const events = new EventSource("/events");
  events.onopen = () => { badge.className = "live on"; };
  events.onerror = () => { badge.className = "live off"; };
  events.onmessage = (m) => {
    let hint;
    try { hint = JSON.parse(m.data); } catch { return; }
    if (typeof hint.event !== "string") return;
    if (hint.event === "resync" || (typeof hint.key === "string" && view && view.wants(hint))) refreshSoon();
  };
}

async function start() {
  try {
    config = await get("/api/config");
  } catch (e) {
    showError(String(e.message || e));
  }
  document.getElementById("mode").textContent = config.writes ? "writes allowed" : "read-only";
  window.addEventListener("hashchange", route);
  setInterval(tick, 250);
  route();
  live();
}

start();
