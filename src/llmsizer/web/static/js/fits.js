// "What fits my machine" (issue #16): `llmsizer models --fits-on DEVICE --json` as a page. The list is the API's
// answer (GET /api/v1/models/fits-on), in the answer's own order (its ``order`` sentence, fits_on.py ranked:
// the models that fit first, the largest first), with its quality column.

import { ApiError, debounce, get, post } from "./api.js";
import { el, formatBytes, formatCount, formatRate } from "./format.js";
import { cliCommand, formValues, loadFromUrl, saveToUrl } from "./state.js";
import { copyButton } from "./ui.js";

export const FIELDS = ["fits_on", "count", "gpus_per_node", "memory", "host_memory", "headroom", "context", "concurrency", "engine", "engine_version",
  "query", "hardware"];
const PASTED = "hardware.yaml"; // how the CLI command and the server's messages name the pasted entry

const form = document.getElementById("fits-form");
const $ = (id) => document.getElementById(id);
let names = new Map(); // catalog id -> short name
let current = null;
let seq = 0;

function status(text, busy = false) { const s = $("status"); s.textContent = text; s.classList.toggle("busy", busy); }

function showProblem(e) {
  const p = $("problem");
  $("results").classList.toggle("stale", Boolean(e));
  form.querySelectorAll("[aria-invalid]").forEach((c) => c.removeAttribute("aria-invalid"));
  if (!e) { p.hidden = true; p.textContent = ""; return; }
  p.hidden = false;
  p.textContent = e.message;
  const field = form.elements.namedItem(e.field || "");
  if (field) field.setAttribute("aria-invalid", "true");
}

function command() {
  const f = formValues(form, FIELDS);
  const { query, fits_on: on, hardware, ...rest } = f;
  const parts = cliCommand("models", query || "", { "fits-on": on || "DEVICE", ...rest,
    ...(hardware ? { "hardware-file": PASTED } : {}) }, ["--json"]);
  return parts.replace("llmsizer models '' ", "llmsizer models ");
}

async function compute() {
  const f = formValues(form, FIELDS);
  saveToUrl(f);
  if (!f.fits_on) { showProblem(new ApiError("give a device or instance", 400, "fits_on")); return; }
  if (current) current.abort();
  current = new AbortController();
  const mine = ++seq;
  status("evaluating every catalog model on this hardware…", true);
  try {
    const data = f.hardware // a pasted entry travels in a POST body, as the text of a file named PASTED
      ? await post("/models/fits-on", { ...f, hardware_name: PASTED }, current.signal)
      : await get(`/models/fits-on?${new URLSearchParams(f)}`, current.signal);
    if (mine !== seq) return;
    showProblem(null);
    render(data);
    status(`the same answer as: ${command()}`);
  } catch (e) {
    if (e.name === "AbortError") return;
    showProblem(e instanceof ApiError ? e : new Error(`the server did not answer (${e.message})`));
    status("");
  }
}

/** The CLI's line for a model that fits only with experts in host memory (cli/model_cmds.py _fits_on). */
export function hostLine(h) {
  return `fits with experts in host memory in ${h.weights.replace(/^gguf:/, "").toUpperCase()} (${h.format_rule}; ` +
    `${formatBytes(h.memory_per_device)} per GPU, ${formatBytes(h.host_bytes)} of host RAM, ` +
    `${h.host_memory_checked ? "checked" : "unchecked"}): llama.cpp ${h.flags.join(" ")}`;
}

function render(d) {
  const rows = d.models; // ranked by the answer (fits_on.py ranked), its order stated in d.order
  $("fits-order").textContent = d.order;
  const n = d.fitting.length; // the answer's own count (fits_on.py fitting: host RAM checked counts)
  $("summary").replaceChildren(el("b", { id: "fit-count", "data-fits": n }, `${n} of ${rows.length}`),
    ` catalog models fit ${d.devices_text} at ${d.context.toLocaleString("en-US")} tokens × ${d.concurrency} sequence(s).`);
  $("fits-warnings").replaceChildren(...(d.warnings || []).map((w) => el("li", {}, `warning: ${w}`))); // as the CLI's
  // the CLI's table (render/fits_on_text.py FITS_ON_COLUMNS), cell for cell from the same JSON fields, "-" where it has none
  $("fits-table").tBodies[0].replaceChildren(...rows.map((m) => {
    const ok = m.status === "meets";
    const h = m.experts_in_host;
    return el("tr", { "data-id": m.id, "data-status": m.status },
      el("th", { scope: "row", title: `${m.id}: ${m.reasons.join("; ")}` }, names.get(m.id) || m.id,
        ...(ok ? [] : [el("div", { class: "small muted reason" }, m.reasons.join("; "))]), // a fit's reason: the columns
        ...(h ? [el("div", { class: "small experts-in-host" }, hostLine(h))] : [])),
      el("td", { class: "num" }, formatCount(m.params)),
      el("td", { class: "nowrap" }, ok ? m.weights_format.replace(/^gguf:/, "") : "-"),
      el("td", {}, ...quality(m.quality)),
      el("td", {}, ok ? m.engine + engineFlags(m) : "-"),  // fits_on_text's engine cell
      el("td", { class: "num", "data-bytes": m.memory_per_device ?? "" }, ok && m.memory_per_device ? formatBytes(m.memory_per_device) : "-"),
      el("td", { class: "num", "data-value": m.tokens_per_second_per_user ?? "" }, !ok ? "-" : m.tokens_per_second_per_user ? formatRate(m.tokens_per_second_per_user) : "unknown"),
      el("td", { class: "num" }, !ok ? "-" : m.tokens_per_second ? formatRate(m.tokens_per_second) : "unknown"), // no bandwidth: the warning says why
      // the CLI's "yes" / "experts in host memory (below)" / "no: <reasons>"; here the line and reasons are in the row
      el("td", {}, el("span", { class: `badge ${ok ? "b-yes" : "b-no"}` }, ok ? "yes" : h ? "experts in host memory" : "no")));
  }));
}

/** The quality cell: its text, "+3.52 ppl" kept on one line, the parenthesis ("(below Q4_0)") on the next if need be. */
// recommend.Option.engine_flags: a layout's flags after the engine (` --tp 2`, ` --tp 1 --pp 2`; none at TP 1)
function engineFlags(m) {
  if (m.layout_flags) return ` ${m.layout_flags}`;
  return m.tensor_parallel > 1 ? ` --tp ${m.tensor_parallel}` : "";
}

function quality(q) {
  if (!q) return ["-"];
  const i = q.indexOf(" (");
  return i < 0 ? [el("span", { class: "nowrap" }, q)]
    : [el("span", { class: "nowrap" }, q.slice(0, i)), " ", q.slice(i + 1)];
}

copyButton($("copy-cli"), $("action-status"), command);

const computeSoon = debounce(compute, 300);
form.addEventListener("input", computeSoon);
form.addEventListener("submit", (e) => { e.preventDefault(); compute(); });

async function start() {
  const q = loadFromUrl(form, FIELDS);
  await Promise.all([
    fetch("/pages/choices.json").then((r) => r.json()).then((choices) => {
      const engine = $("engine");
      for (const v of choices.choices.engines || []) engine.append(el("option", { value: v }, v));
      if (q) engine.value = q.get("engine") ?? ""; // now offered
      // estimate/verdict.py DEFAULT_HEADROOM, and LLAMACPP_FIT_TARGET: the margin llama.cpp keeps on a GPU instead
      // specs/workload.py InferenceWorkload.context, as `models --fits-on` (and infer) ask it with no --context
      $("context").placeholder = `default ${choices.defaults.context}`;
      $("headroom").placeholder = `default ${choices.defaults.headroom}; llama.cpp on a GPU: ` +
        `${choices.defaults.fit_target / 2 ** 20} MiB`;
    }).catch(() => {}),
    get("/models").then((r) => { // the envelope: the catalog's models under ``models`` (result.envelope)
      names = new Map(r.models.map((m) => [m.id, m.name]));
    }).catch(() => {}),
    get("/hardware").then((h) => {
      $("device-options").replaceChildren(...[...(h.devices || []), ...(h.instances || [])].map((x) => el("option", { value: x.id }, x.name)));
    }).catch(() => {}),
  ]);
  document.body.dataset.ready = "1";
  compute();
}

start();
