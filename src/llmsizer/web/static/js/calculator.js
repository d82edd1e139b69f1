// The calculator (home page): the form is the input of `llmsizer infer` / `train`; the results are their --json
// answers, from the API, re-drawn as the user types (debounced). The fits-on grid is `llmsizer fit` per cell.

import { ApiError, debounce, get, pool, post } from "./api.js";
import { memoryBars } from "./charts.js";
import { el, formatBytes, formatCount, formatInt, formatRate, formatSeconds, formatUsd } from "./format.js";
import { modelPicker } from "./model-picker.js";
import { COMMON_FIELDS, INFER_FIELDS, MEDIA_FIELDS, TRAIN_FIELDS, apiFields, cliCommand, download, formValues, loadFromUrl,
  requestYaml, saveToUrl } from "./state.js";
import { copyButton, fillChoices, setupTabs } from "./ui.js";

// the fits-on grid: common devices of each class (consumer card, inference cards, training cards, AMD)
export const GRID_DEVICES = ["rtx-4090", "l4", "a10g", "l40s", "a100-sxm-80gb", "h100-sxm", "h200", "mi300x"];
export const GRID_COUNTS = [1, 2, 4, 8];

const form = document.getElementById("calc-form");
const $ = (id) => document.getElementById(id);
let tab = "infer";
let instances = [];
let defaults = {}; // the estimator's defaults (/pages/choices.json)
let engineNames = {}; // each engine's name in the answers (/pages/choices.json)
let kvDtypes = { all: [], byEngine: {} }; // the KV dtypes the CLI takes, per engine (/pages/choices.json)
let current = null; // AbortController of the request in flight
let gridCurrent = null;
let seq = 0;

const picker = modelPicker(() => { changed(); visionSoon(); });

/** Show the image and video inputs when the model has a vision encoder (POST /inspect: params.by_component.vision). */
async function checkVision() {
  const mine = ++visionAsked;
  let has = false;
  try {
    const d = await post("/inspect", picker.fields());
    has = (d.params?.by_component?.vision || 0) > 0;
  } catch { has = false; } // a model the server cannot read: the estimate says why
  if (mine !== visionAsked) return;
  $("media").hidden = !has;
  if (has !== vision) { vision = has; changed(); }
}

let vision = false; // the model has a vision encoder (its inspect answer counts vision parameters)
let visionAsked = 0;

function workload() {
  const names = tab === "train" ? TRAIN_FIELDS : vision ? [...INFER_FIELDS, ...MEDIA_FIELDS] : INFER_FIELDS;
  const fields = formValues(form, names);
  const common = formValues(form, COMMON_FIELDS.filter((k) => k !== "model"));
  return { fields, common };
}

function state() {
  const { fields, common } = workload();
  const model = picker.file ? {} : formValues(form, ["model", "hub"]);
  return { tab, ...model, ...common, ...fields };
}

function status(text, busy = false) { const s = $("status"); s.textContent = text; s.classList.toggle("busy", busy); }

function showProblem(e) {
  const p = $("problem");
  $("results").classList.toggle("stale", Boolean(e)); // the numbers below answer the previous input
  if (!e) { p.hidden = true; p.textContent = ""; form.querySelectorAll("[aria-invalid]").forEach((c) => c.removeAttribute("aria-invalid")); return; }
  p.hidden = false;
  p.textContent = e.message;
  const field = e.field && form.elements.namedItem(e.field);
  if (field) field.setAttribute("aria-invalid", "true");
}

/** The reverse questions need a budget: a memory, or (training) a device whose memory is the budget. */
function reverseAsked(fields, common) { return Boolean(common.memory || (tab === "train" && fields.train_device)); }

async function compute() {
  const { fields, common } = workload();
  const body = { ...picker.fields(), ...apiFields(fields), ...common };
  if (reverseAsked(fields, common)) Object.assign(body, tab === "train" ? { max_batch: true, max_seq: true } : { max_context: true, max_concurrency: true });
  if (current) current.abort();
  current = new AbortController();
  const mine = ++seq;
  status("computing…", true);
  try {
    const data = await post(tab === "train" ? "/train" : "/infer", body, current.signal);
    if (mine !== seq) return;
    showProblem(null);
    render(data);
    gridSoon(); // the grid asks 32 questions of the same model and workload: only once this one is answered
    status(`answered in the same way as: ${command()}`);
  } catch (e) {
    if (e.name === "AbortError") return;
    showProblem(e instanceof ApiError ? e : new Error(`the server did not answer (${e.message})`));
    status("");
  }
}

let answered = {}; // the engine and weight format of the answer on show (its assumptions), for the request YAML

function render(d) {
  answered = Object.fromEntries((d.assumptions || []).filter((a) => a.name === "engine" || a.name === "weights")
    .map((a) => [a.name, String(a.value)]));
  const dev = d.totals.device || { bytes: 0, low: 0, high: 0 };
  const total = $("total");
  total.textContent = formatBytes(dev.bytes);
  total.dataset.bytes = String(dev.bytes);
  $("total-range").textContent = `range ${formatBytes(dev.low)} – ${formatBytes(dev.high)}`;
  const fits = d.details.fits;
  $("verdict").replaceChildren(fits === undefined || fits === null ? "" :
    el("span", { class: `badge ${fits ? "b-yes" : "b-no"}`, id: "fits" }, fits ? "fits" : "does not fit"));
  $("verdict-text").textContent = d.details.verdict || "";
  // vLLM / SGLang reserve their pool whatever the load: the reservation (the total above) and what this workload
  // needs of it (the estimate's workload_bytes), worded as render/text.py pool_and_need words it for infer, fit, plan
  const need = d.details.workload_bytes;
  const offered = d.details.workload_budget_bytes;
  const pn = $("pool-need");
  pn.hidden = need === undefined || need === null;
  pn.replaceChildren(...(pn.hidden ? [] : ["reserved ",
    el("b", { id: "reserved-bytes", "data-bytes": dev.bytes }, formatBytes(dev.bytes)),
    ` per device (${engineNames[answered.engine] || answered.engine} takes its pool whatever the load); this workload needs `,
    el("b", { id: "need-bytes", "data-bytes": need }, formatBytes(need)),
    offered === undefined || offered === null ? " of it" : ` of the ${formatBytes(offered)} it offers (with the CUDA context)`,
    need > (offered ?? dev.bytes) ? " (more than it offers)" : ""]));
  const mt = $("media-tokens");
  mt.hidden = !d.details.media_tokens;
  mt.replaceChildren(...(d.details.media_tokens ? ["Images and video: ",
    el("b", { id: "media-token-count", "data-value": d.details.media_tokens }, `${formatInt(d.details.media_tokens)} tokens`),
    ` per sequence${d.details.image_tokens_each ? ` (${formatInt(d.details.image_tokens_each)} per image)` : ""}, added to `
    + `${formatInt(d.details.text_context)} text tokens: ${formatInt(d.details.context_with_media)} tokens in the KV cache and the prefill`] : []));

  const rows = [];
  for (const loc of ["device", "host"]) {
    const segs = d.items.filter((it) => it.location === loc).map((it) => ({ name: it.name, bytes: it.bytes }));
    if (!segs.some((g) => g.bytes > 0)) continue;
    const n = d.details.devices || d.details.gpus;
    const scope = d.totals.device?.scope;  // "per device", or "all N devices" when the bytes are a sum over GPUs
    const deviceLabel = scope && scope !== "per device" ? scope : (n > 1 ? `each of ${n} devices` : "device");
    rows.push({ label: loc === "device" ? deviceLabel : "host RAM", segments: segs,
      budget: loc === "device" ? d.details.memory_budget : null, capacity: loc === "device" ? d.details.device_memory : null });
  }
  const box = $("bar-box");
  box.querySelector("svg")?.remove();
  box.prepend(memoryBars("memory", `${d.model}: memory ${d.totals.device?.scope ?? "per device"}`, rows));

  const tbody = $("breakdown").tBodies[0];
  tbody.replaceChildren(...d.items.map((it) => el("tr", { "data-name": it.name },
    el("td", {}, it.name), el("td", {}, it.location),
    el("td", { class: "num", "data-bytes": it.bytes }, formatBytes(it.bytes)),
    el("td", { class: "num" }, it.low === it.high ? "" : `${formatBytes(it.low)} – ${formatBytes(it.high)}`),
    el("td", { class: "how" }, it.formula, el("span", { class: "src" }, it.source)))));
  for (const [loc, t] of Object.entries(d.totals)) {
    tbody.append(el("tr", { class: "total", "data-name": `total-${loc}` }, el("td", {}, `TOTAL ${t.scope}`), el("td", {}, loc),
      el("td", { class: "num", "data-bytes": t.bytes }, formatBytes(t.bytes)),
      el("td", { class: "num" }, `${formatBytes(t.low)} – ${formatBytes(t.high)}`), el("td", { class: "how" }, d.details.peak_phase ? `peak at: ${d.details.peak_phase}` : "")));
  }
  $("assumptions").tBodies[0].replaceChildren(...d.assumptions.map((a) => el("tr", {},
    el("td", {}, el("code", {}, a.name)), el("td", {}, `${a.value}${a.default ? " (default)" : ""}`), el("td", { class: "how" }, a.why))));
  $("warnings").replaceChildren(...(d.warnings.length ? [el("h3", {}, "Warnings"),
    el("ul", { class: "notes" }, d.warnings.map((w) => el("li", {}, w)))] : []));

  const r = d.reverse || {};
  const cards = [];
  const rv = (id, label, value, unit, note) => el("div", { id }, label, el("b", { "data-value": value ?? "" },
    value === undefined ? "–" : `${formatInt(value)} ${unit}${value === 1 ? "" : "s"}`), el("span", { class: "small muted" }, note));
  if (tab === "train") {
    cards.push(rv("rev-batch", "largest micro-batch", r.max_micro_batch, "sequence", r.max_micro_batch === 0 ? "batch 1 does not fit" : ""));
    cards.push(rv("rev-seq", "longest sequence", r.max_seq_len, "token", r.max_seq_len === 0 ? "nothing fits" : ""));
  } else {
    cards.push(rv("rev-context", "largest context", r.max_context, "token", r.max_context === 0 ? "no context fits" : ""));
    cards.push(rv("rev-concurrency", "largest concurrency", r.max_concurrency, "sequence", r.max_concurrency === 0 ? "not even one" : ""));
  }
  // what the answers mean beyond their number (past the model's context window, the engine's running cap): the API's
  for (const note of d.reverse_notes || []) cards.push(el("div", { class: "small muted reverse-note" }, `note: ${note}`));
  if (!d.reverse) cards.push(el("div", { class: "small muted" }, "Give a memory per device (or, training, a device) to see the largest workload that fits."));
  $("reverse").replaceChildren(...cards);
  const du = d.duration;
  $("duration").replaceChildren(...(du ? [el("div", { class: "card", id: "duration-card", "data-seconds": du.seconds ?? "" },
    el("h3", {}, "Duration"),
    du.seconds === null ? el("p", {}, du.warnings.join("; ")) : el("p", {},
      el("b", {}, `${formatSeconds(du.seconds)} wall clock`), `, ${formatRate(du.device_hours)} device-hours: `,
      `${formatCount(du.tokens)} tokens × ${du.flops_per_token.toPrecision(3)} FLOP/token (${du.flops_formula}) on ${du.devices} device(s) `
      + `at ${(du.utilization * 100).toFixed(1)} % of ${du.peak_flops.toPrecision(3)} FLOP/s (${du.peak_key})`),
    el("p", { class: "small muted" }, `${du.flops_source}; utilization: ${du.utilization_source}`))] : []));
}

// ---------------------------------------------------------------------------------------------- fits-on grid

/** A cell's short form of fit's hint (render/fit_text.py fits_at_line): the format, on another engine when the
 * asked one has none that fits; for training, the settings changed. */
export function fitsAtText(at) {
  if (at.changes) return `fits with ${Object.entries(at.changes).map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`).join(", ")}`;
  const fmt = at.weights.replace(/^gguf:/, "");
  return at.same_engine === false ? `fits on ${at.engine} at ${fmt}` : `fits at ${fmt}`;
}

function cheapestInstance(device, count) {
  const found = instances.filter((i) => i.device === device && i.device_count === count && i.price_per_hour !== null);
  return found.sort((a, b) => a.price_per_hour - b.price_per_hour)[0] || null;
}

function gridSkeleton() {
  const tbody = $("fits-grid").tBodies[0];
  tbody.replaceChildren(...GRID_DEVICES.map((dev) => el("tr", {}, el("th", { scope: "row" }, dev),
    ...GRID_COUNTS.map((n) => el("td", {}, el("div", { class: "cell pending", id: `cell-${dev}-${n}` }, "…"))))));
}

async function grid() {
  const { fields, common } = workload();
  const base = { ...picker.fields(), ...apiFields(fields) };
  delete base.device; delete base.count; delete base.gpus; delete base.tp; // each cell says its own
  if (common.headroom) base.headroom = common.headroom;
  if (tab === "train") base.train = true;
  if (gridCurrent) gridCurrent.abort();
  const ctl = (gridCurrent = new AbortController());
  const asked = location.search; // the state this grid answers; stamped on the grid once every cell is in
  delete $("fits-grid").dataset.answered;
  gridSkeleton();
  const cells = GRID_DEVICES.flatMap((dev) => GRID_COUNTS.map((n) => [dev, n]));
  await pool(cells, 4, async ([dev, n]) => {
    if (ctl.signal.aborted) return;
    const inst = cheapestInstance(dev, n);
    const body = inst ? { ...base, device: inst.id } : { ...base, device: dev, count: n };
    const cell = $(`cell-${dev}-${n}`);
    try {
      const r = await post("/fit", body, ctl.signal);
      if (ctl.signal.aborted || !cell) return;
      cell.className = `cell ${r.fits ? "fits" : "nofit"}`;
      cell.dataset.fits = String(r.fits);
      if (r.tokens_per_second_total != null) cell.dataset.tokensPerSecond = String(r.tokens_per_second_total);
      const lines = [el("b", {}, r.fits ? "fits" : "does not fit"),
        `${formatBytes(r.memory_per_device)} of ${formatBytes(r.budget_per_device)}`];
      if (!r.fits && r.fits_at) lines.push(el("br"), fitsAtText(r.fits_at));
      if (r.fits && r.speed) lines.push(el("br"), `${formatRate(r.tokens_per_second_total)} tok/s, TTFT ${formatSeconds(r.speed.ttft_seconds)}`);
      const price = r.cost?.price_per_hour ?? (inst ? inst.price_per_hour : null);
      if (price !== null && price !== undefined) lines.push(el("br"), `${formatUsd(price)}/h ${inst ? inst.name : ""}`);
      if (r.fits && r.cost?.per_million_tokens) lines.push(el("br"), `${formatUsd(r.cost.per_million_tokens)} / M tokens`);
      const tt = r.training_time;
      if (r.fits && tt?.seconds) lines.push(el("br"), `${formatSeconds(tt.seconds)}${tt.cost ? `, ${formatUsd(tt.cost)} per run` : ""}`);
      cell.replaceChildren(...lines.map((x) => (typeof x === "string" ? document.createTextNode(` ${x}`) : x)));
      cell.title = (r.reasons || []).join("; ");
    } catch (e) {
      if (e.name === "AbortError" || !cell) return;
      cell.className = "cell nofit";
      cell.dataset.error = e.message;
      cell.textContent = e.message.length > 80 ? `${e.message.slice(0, 79)}…` : e.message;
      cell.title = e.message;
    }
  });
  if (ctl.signal.aborted) return;
  $("fits-grid").dataset.answered = asked;
  const errors = [...$("fits-grid").querySelectorAll(".cell")].map((c) => c.dataset.error);
  if (errors.length && errors.every((m) => m && m === errors[0])) { // one answer, said once
    $("fits-grid").tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: 1 + GRID_COUNTS.length, class: "problem",
      id: "grid-problem" }, `llmsizer fit answers for every cell: ${errors[0]}`)));
  }
}

// ---------------------------------------------------------------------------------------------- actions

function command() {
  const { fields, common } = workload();
  const f = { ...(formValues(form, ["hub"])), ...fields, ...common };
  const sw = reverseAsked(fields, common) ? (tab === "train" ? ["--max-batch", "--max-seq"] : ["--max-context", "--max-concurrency"]) : [];
  return cliCommand(tab === "train" ? "train" : "infer", picker.label() || "MODEL", f, sw);
}

copyButton($("copy-cli"), $("action-status"), command);

$("download-yaml").addEventListener("click", () => {
  const { fields, common } = workload();
  const text = requestYaml(tab, picker.label() || "MODEL", fields, common, defaults, tab === "train" ? {} : answered);
  download("request.yaml", text, "application/yaml");
  $("action-status").textContent = "request.yaml downloaded: check it on the Request page";
});

// ---------------------------------------------------------------------------------------------- wiring

const computeSoon = debounce(compute, 250);
const gridSoon = debounce(grid, 400);
const visionSoon = debounce(checkVision, 250);

/** The KV dtype select offers what the CLI takes for the chosen engine (every name with the engine left to the
 * device); a choice the engine does not take goes back to the engine's default. */
function offerKvDtypes() {
  const sel = $("kv_dtype");
  const keep = sel.value;
  const names = kvDtypes.byEngine[$("engine").value] || kvDtypes.all;
  sel.replaceChildren(sel.options[0], ...names.map((v) => el("option", { value: v }, v)));
  sel.value = names.includes(keep) ? keep : "";
}

function changed() {
  delete $("fits-grid").dataset.answered; // the grid on show answers the previous input until it is asked again
  saveToUrl(state());
  computeSoon();
}

$("engine").addEventListener("input", offerKvDtypes); // before the form's listener reads the KV dtype
form.addEventListener("input", changed);
form.addEventListener("submit", (e) => e.preventDefault());

const tabs = setupTabs(document.querySelector("[role=tablist]"), (name) => { tab = name; changed(); });

async function start() {
  const q = loadFromUrl(form, [...COMMON_FIELDS, "hub", ...INFER_FIELDS, ...MEDIA_FIELDS, ...TRAIN_FIELDS]);
  if (q && q.get("tab") === "train") { tabs.select("train", false); tab = "train"; }
  const [choices] = await Promise.all([
    fetch("/pages/choices.json").then((r) => r.json()),
    get("/hardware").then((h) => {
      instances = h.instances || [];
      $("device-options").replaceChildren(...[...(h.devices || []), ...instances].map((x) => el("option", { value: x.id }, x.name)));
    }).catch(() => {}),
  ]);
  fillChoices(form, choices);
  defaults = choices.defaults;
  engineNames = choices.engine_names || {};
  kvDtypes = { all: choices.choices.kv_dtypes || [], byEngine: choices.kv_dtypes_by_engine || {} };
  if (q) for (const c of form.querySelectorAll("select[name]")) c.value = q.get(c.name) ?? ""; // now offered
  offerKvDtypes();
  await checkVision();
  document.body.dataset.ready = "1";
  changed();
}

start();
