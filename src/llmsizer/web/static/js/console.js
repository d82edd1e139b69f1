// The provider console: sign-in (a token checked by the server, then a signed HttpOnly session cookie), the
// bookings timeline per pool and node, the queue with its check results, confirm / release for operators, the
// audit log, and the inventory editor for operators (PUT /capacity/inventory). Every number is the API's (/api/v1/capacity, the CLI's capacity answers); the server decides who
// may do what: the buttons an operator sees are a convenience, a requester's forged call is refused (403).

import { API, ApiError } from "./api.js";
import { gantt } from "./charts.js";
import { flagLines, planned, savedLine } from "./console_flags.js";
import { el } from "./format.js";

const $ = (id) => document.getElementById(id);
let session = null;

async function call(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && session && session.csrf) headers["x-csrf-token"] = session.csrf;
  const res = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin" });
  const data = (res.headers.get("content-type") || "").includes("json") ? await res.json() : await res.text();
  if (!res.ok) throw new ApiError(data && data.detail ? data.detail : String(data), res.status, data && data.field);
  return data;
}

function problem(msg) {
  $("problem").hidden = !msg;
  $("problem").textContent = msg || "";
}

const day = (iso) => (iso ? String(iso).slice(0, 16).replace("T", " ") : "");
const pct = (v) => `${Math.round(v * 100)}%`;

async function act(action, id) {
  problem("");
  try {
    const [r] = (await call("POST", `/capacity/${action}`, { ids: [id] })).transitions;
    $("status").textContent = r.refused ? `${id}: refused: ${r.refused}` : `${id}: ${r.before} -> ${r.after}`;
  } catch (e) {
    problem(e.message);
  }
  await load();
}

function buttons(r) {
  if (!session || session.role !== "operator") return [];
  const out = [];
  if (r.state === "requested" || r.state === "held") {
    out.push(el("button", { type: "button", class: "primary confirm", "data-id": r.id, onclick: () => act("confirm", r.id) },
      "Confirm"));
  }
  if (["requested", "held", "confirmed", "active"].includes(r.state)) {
    out.push(el("button", { type: "button", class: "release", "data-id": r.id, onclick: () => act("release", r.id) },
      "Release"));
  }
  return out;
}

// the plan's numbers the booking was made for (the store's record: capacity show --json), as the plan words them;
// "-" for a booking made before they were recorded
function fill(table, rows) {
  const body = $(table).tBodies[0];
  body.replaceChildren(...rows);
}

function render(view) {
  const node = {};
  for (const n of view.nodes) node[n.id] = n;
  const rows = [];
  for (const n of view.nodes) rows.push({ pool: (n.pools[0] || "-"), node: n.id, devices: n.devices, label: n.id });
  rows.sort((a, b) => (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : 0));
  const holds = view.holds.map((h) => ({ ...h, start: new Date(`${String(h.start).replace(" ", "T")}Z`), end: new Date(`${String(h.end).replace(" ", "T")}Z`) }))
    .map((h) => (h.end.getUTCFullYear() > 9000 ? { ...h, end: new Date(NaN) } : h));
  const finiteEnd = Math.max(...holds.map((h) => h.end.getTime()).filter(Number.isFinite), Date.now() + 86400e3);
  for (const h of holds) if (!Number.isFinite(h.end.getTime())) h.end = new Date(finiteEnd);
  const notes = {};
  for (const n of view.nodes) notes[n.id] = `peak ${pct(n.peak)}, now ${pct(n.now)} of ${n.devices}`;
  const fig = $("timeline");
  fig.querySelector("svg")?.remove();
  fig.prepend(gantt("timeline", `Bookings${view.provider ? `: ${view.provider}` : ""}`, rows, holds, notes, new Date()));
  const flags = flagLines(view);  // orphaned bookings and ones across a maintenance window: not on the timeline
  $("disagree").hidden = !flags.length;
  $("disagree-list").replaceChildren(...flags.map((t) => el("li", {}, t)));
  fill("queue", view.queue.map((r) => el("tr", { "data-id": r.id },
    el("td", {}, el("code", {}, r.id)), el("td", {}, r.job), el("td", {}, r.state),
    el("td", {}, `${day(r.start)} -> ${day(r.end)}`),
    el("td", {}, r.fits === null ? "not placed yet" : r.fits ? el("span", { class: "badge b-ok" }, "fits")
      : el("span", { class: "badge b-no", title: r.binding }, r.binding)),  // confirm's own reason, verbatim
    el("td", {}, ...buttons(r)))));
  fill("bookings", view.reservations.map((r) => el("tr", { "data-id": r.id },
    el("td", {}, el("code", {}, r.id)), el("td", {}, r.job), el("td", {}, r.state), el("td", {}, day(r.start)),
    el("td", {}, day(r.end)), el("td", { class: "plan" }, planned(r)),
    el("td", {}, ...buttons(r).filter((b) => b.classList.contains("release"))))));
  fill("inventory", view.nodes.map((n) => el("tr", {}, el("td", {}, n.id), el("td", {}, n.site), el("td", {}, n.device),
    el("td", { class: "num" }, n.devices), el("td", {}, n.pools.join(", ")), el("td", { class: "num" }, pct(n.now)),
    el("td", { class: "num" }, pct(n.peak)))));
  fill("audit", view.audit.slice().reverse().map((e) => el("tr", {},
    el("td", {}, day(e.at)), el("td", {}, e.actor), el("td", {}, e.action), el("td", {}, el("code", {}, e.reservation)),
    el("td", {}, e.before || "(new)"), el("td", {}, e.after), el("td", { class: "how" }, e.detail || ""))));
}

async function load() {
  try {
    render(await call("GET", "/capacity/console"));
    const operator = session && session.role === "operator";
    $("inventory-edit").hidden = !operator;
    if (operator && document.activeElement !== $("inventory-text")) {
      $("inventory-text").value = await call("GET", "/capacity/inventory");
    }
  } catch (e) {
    problem(e.message);
  }
}

$("inventory-edit").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  problem("");
  try {
    const r = await call("PUT", "/capacity/inventory", { inventory: $("inventory-text").value });
    $("status").textContent = savedLine(r);
  } catch (e) {
    problem(e.message);
    return;
  }
  await load();
});

async function start() {
  try {
    // a server without an inventory says so here (200), not in a 503 the browser logs as an error
    const st = await call("GET", "/capacity/status");
    if (!st.inventory) { problem(st.detail); return; }
    session = await call("GET", "/capacity/session");
  } catch (e) {
    problem(e.message);
    return;
  }
  $("login").hidden = session.signed_in;
  $("console").hidden = !session.signed_in;
  if (!session.signed_in) {
    $("token").focus();
    return;
  }
  $("who").textContent = session.auth ? `Signed in as ${session.name} (${session.role})` : "No auth file: every call is allowed";
  $("sign-out").hidden = !session.auth;
  await load();
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  problem("");
  try {
    await call("POST", "/capacity/login", { token: $("token").value });
    $("token").value = "";
  } catch (e) {
    problem(e.message);
    return;
  }
  await start();
});
$("reload").addEventListener("click", load);
$("sign-out").addEventListener("click", async () => {
  await call("POST", "/capacity/logout", {});
  session = null;
  await start();
});
start();
