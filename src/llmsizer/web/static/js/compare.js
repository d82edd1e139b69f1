// Compare: `llmsizer recommend` as a page. Ranked options with the reason for each choice and each rejection,
// cost against speed, and the CPU-or-GPU advice, all from the recommend API's answer.

import { ApiError, debounce, get, post } from "./api.js";
import { costSpeed } from "./charts.js";
import { el, formatBytes, formatFigureCount, formatRate, formatSeconds, formatTick, formatUsd } from "./format.js";
import { modelPicker } from "./model-picker.js";
import { showProblem as showBoxAndField } from "./problems.js";
import { cliCommand, formValues, loadFromUrl, saveToUrl } from "./state.js";
import { copyButton, fillChoices, needsModel, setupTabs } from "./ui.js";

const INFER = ["context", "concurrency", "output_tokens", "weights", "tokens_per_second", "user_tokens_per_second", "max_ttft"];
const TRAIN = ["tokens", "method", "micro_batch", "seq_len", "grad_checkpointing", "deadline", "max_cost"];
const COMMON = ["max_cost_per_hour", "provider", "cloud_only", "laptop", "headroom", "top"];
const MODEL = ["model", "hub"]; // kept in the URL; a dropped file is not (its header lives on the server)

const form = document.getElementById("cmp-form");
const $ = (id) => document.getElementById(id);
let tab = "infer";
let current = null;

function fields() {
  const f = formValues(form, [...COMMON, ...(tab === "train" ? TRAIN : INFER)]);
  if (f.provider) f.provider = [f.provider];
  return f;
}

function command() {
  const f = fields();
  const flat = { ...f, ...(f.provider ? { provider: f.provider[0] } : {}) };
  if (!picker.label()) return null; // no model, no command
  return cliCommand("recommend", picker.label(), flat, [tab === "train" ? "--train" : "--infer"]);
}

function status(text, busy = false) { const s = $("status"); s.textContent = text; s.classList.toggle("busy", busy); }

async function compute() {
  const f = fields();
  const body = { ...picker.fields(), ...f, [tab === "train" ? "train" : "infer"]: true };
  saveToUrl({ tab, ...(picker.file ? {} : formValues(form, MODEL)), ...formValues(form, [...COMMON, ...INFER, ...TRAIN]) });
  needsModel(Boolean(picker.label()), $("action-status"), $("copy-cli"));
  if (current) current.abort();
  current = new AbortController();
  status("searching the catalog…", true);
  $("results").classList.add("stale"); // the options on show answer the previous input until this one is answered
  try {
    const rec = await post("/recommend", body, current.signal);
    showProblem(null);
    render(rec, Number(f.top || 12));
    status(`${rec.options.length} options fit, ${rec.rejected.length} rejected — ${command()}`);
  } catch (e) {
    if (e.name === "AbortError") return;
    showProblem(e instanceof ApiError ? e : new Error(`the server did not answer (${e.message})`));
    status("");
  }
}

/** A 400: the CLI's line in the box above the results, and the same line at the field the API names (its
 * ``field``, problems.js showProblem / showAtField: aria-invalid, described by the message), as the calculator does;
 * the box alone when this tab has no such control (a hidden tab's, or the input as a whole). */
function showProblem(e) {
  showBoxAndField(form, e, (err) => {
    const sent = [...MODEL, ...COMMON, ...(tab === "train" ? TRAIN : INFER)];
    return err.field && sent.includes(err.field) ? [form.elements.namedItem(err.field), err.message] : null;
  });
}

// the option's hardware as the core names it (recommend.Option.devices_text: count, device, instances), verbatim,
// then the catalog's name of the device or instance where that line does not hold it (Standard_D2as_v5)
// and whose it is where the core says (recommend.Option.ownership: "your hardware", "to buy"), as the CLI's table
// and a pipeline option's layout flags (recommend.Option.layout_flags: `--tp 8 --pp 2`), as the CLI's table
const label = (o) => `${o.devices_text}${o.layout_flags ? ` ${o.layout_flags}` : ""}${o.name && !o.devices_text.includes(o.name) ? ` — ${o.name}` : ""}${o.ownership ? ` (${o.ownership})` : ""}`;
const reasons = (o) => el("ul", { class: "reasons" }, o.reasons.map((r) => el("li", {}, r)));

function render(rec, top) {
  const train = rec.kind === "recommend-training";
  const c = rec.chosen;
  $("chosen").replaceChildren(...(c ? [
    el("h2", { id: "chosen-title" }, "Chosen: ", label(c)),
    el("div", { class: "headline" },
      el("span", {}, el("span", { class: "big" }, formatUsd(train ? c.run_cost : c.price_per_hour)), el("span", { class: "sub" }, train ? " for the run" : " per hour")),
      train ? el("span", { class: "sub" }, `${formatSeconds(c.training_seconds)} wall clock, ${formatFigureCount(c.device_hours)} device-hours`)
        : el("span", { class: "sub" }, `${formatRate(c.tokens_per_second)} tokens/s in total incl. TTFT; at the requested concurrency decoding at ${formatRate(c.tokens_per_second_per_user)} per user, TTFT ${formatSeconds(c.ttft_seconds)}${c.ttft_idle_seconds != null && c.ttft_idle_seconds !== c.ttft_seconds ? ` (idle ${formatSeconds(c.ttft_idle_seconds)})` : ""}`),
      el("span", { class: "sub" }, `${c.weights_format || "-"}${c.engine ? ` on ${c.engine}` : ""}, ${formatBytes(c.memory_per_device)} of ${formatBytes(c.budget_per_device)} per device`)),
    reasons(c)] : [el("p", { class: "problem" }, rec.refusal ? `No option: ${rec.refusal}`
      : "No option fits and meets every constraint: see the rejections below.")]));

  $("advice").replaceChildren(...rec.advice.map((a) => el("p", { class: "advice" }, a)),
    ...(rec.quantization.length ? [el("div", { class: "card" }, el("h3", {}, "Which card at which format"), el("ul", { class: "notes" }, rec.quantization.map((q) => el("li", {}, q))))] : []));

  const pts = rec.options.map((o) => ({ x: train ? o.training_seconds / 3600 : o.tokens_per_second, y: train ? o.run_cost : o.price_per_hour,
    label: label(o), kind: o.device_kind, chosen: o.status === "chosen" }));
  const box = $("chart-box");
  box.querySelector("svg")?.remove();
  box.prepend(train
    ? costSpeed("cost-speed", `${rec.model}: run cost against run time`, pts, { x: "wall-clock hours (log)", y: "USD per run (log)", unit: "h", xFmt: (v) => `${formatRate(v)} h`, xTick: (v) => `${formatTick(v)} h` })
    : costSpeed("cost-speed", `${rec.model}: price against speed`, pts, { x: "output tokens per second, all users (log)", y: "USD per hour (log)", unit: "tokens/s" }));

  $("chart-caption").textContent = train
    ? "Each option that fits and meets the constraints: its run time against the run's cost (log scales); the chosen one ringed in red."
    : "Each option that fits and meets the constraints: its output speed (all users) against its price per hour (log scales); the chosen one ringed in red.";
  $("speed-col").textContent = train ? "wall clock" : "tok/s total incl. TTFT";
  $("extra-col").textContent = train ? "run cost" : "TTFT at the concurrency";
  $("options").tBodies[0].replaceChildren(...rec.options.slice(0, top).map((o, i) => el("tr", { class: o.status === "chosen" ? "chosen" : "" },
    el("td", { class: "num" }, String(i + 1)), el("td", {}, label(o)),
    el("td", {}, `${o.weights_format || "-"}${o.engine ? `, ${o.engine}` : ""}`),
    el("td", { class: "num" }, formatUsd(o.price_per_hour)),
    el("td", { class: "num" }, train ? formatSeconds(o.training_seconds) : formatRate(o.tokens_per_second)),
    el("td", { class: "num" }, train ? formatUsd(o.run_cost) : formatSeconds(o.ttft_seconds)),
    el("td", {}, reasons(o)))));
  $("rejected").tBodies[0].replaceChildren(...rec.rejected.slice(0, top).map((o) => el("tr", {},
    el("td", {}, label(o)), el("td", { class: "num" }, formatUsd(o.price_per_hour)), el("td", {}, reasons(o)))));
  $("notes").replaceChildren(...(rec.assumptions.length ? [el("div", { class: "card" }, el("h3", {}, "Assumptions"),
    el("ul", { class: "notes" }, rec.assumptions.map((a) => el("li", {}, el("code", {}, a.name), ` = ${a.value}${a.default ? " (default)" : ""}: ${a.why}`))))] : []),
  ...(rec.warnings.length ? [el("div", { class: "card" }, el("h3", {}, "Warnings"), el("ul", { class: "notes" }, rec.warnings.map((w) => el("li", {}, w))))] : []));
}

copyButton($("copy-cli"), $("action-status"), command);

const computeSoon = debounce(compute, 400);
const picker = modelPicker(computeSoon); // a name, a Hub id, or a dropped config.json / .gguf / .safetensors
form.addEventListener("input", (e) => { if (!["model", "hub", "model-file"].includes(e.target.id)) computeSoon(); });
form.addEventListener("submit", (e) => e.preventDefault());

async function start() {
  const [choices, hw] = await Promise.all([fetch("/pages/choices.json").then((r) => r.json()),
    get("/hardware").catch(() => ({ instances: [] }))]);
  fillChoices(form, choices);
  const providers = [...new Set((hw.instances || []).map((i) => i.provider).filter(Boolean))].sort();
  $("provider").append(...providers.map((p) => el("option", { value: p }, p)));
  const q = loadFromUrl(form, [...MODEL, ...COMMON, ...INFER, ...TRAIN]);
  if (q && q.get("tab") === "train") { tabs.select("train", false); tab = "train"; }
  document.body.dataset.ready = "1";
  compute();
}

const tabs = setupTabs(document.querySelector("[role=tablist]"), (name) => { tab = name; computeSoon(); });

start();
