// The request page: edit a request YAML with the checks of `llmsizer request check` as you type (each problem
// at its line, with the reader's "did you mean"), then the plan report of `llmsizer plan` (HTML, Markdown, JSON).

import { API, ApiError, debounce, post, postText } from "./api.js";
import { el } from "./format.js";
import { download } from "./state.js";

const $ = (id) => document.getElementById(id);
const text = $("request-text");
const gutter = $("gutter");
const STORE = "llmsizer.request";
let filename = "request.yaml";
let checking = null;
let errorLines = new Map();

// "request.yaml:24: job 'x' (training): peft.rnak: unknown key ..." -> [24, "job 'x' ..."]
export function lineOf(message) {
  const m = /^(?:.*?):(\d+): (.*)$/s.exec(message);
  return m ? [Number(m[1]), m[2]] : [null, message];
}

function drawGutter() {
  const n = text.value.split("\n").length;
  const rows = [];
  for (let i = 1; i <= n; i += 1) {
    const msg = errorLines.get(i);
    rows.push(el("div", msg ? { class: "err", "data-line": i, title: msg } : { "data-line": i }, String(i)));
  }
  gutter.replaceChildren(...rows);
  gutter.scrollTop = text.scrollTop;
}

function goToLine(line) {
  const lines = text.value.split("\n");
  const start = lines.slice(0, line - 1).reduce((a, l) => a + l.length + 1, 0);
  text.focus();
  text.setSelectionRange(start, start + (lines[line - 1] || "").length);
  const lh = parseFloat(getComputedStyle(text).lineHeight) || 18;
  text.scrollTop = Math.max(0, (line - 5) * lh);
  gutter.scrollTop = text.scrollTop;
}

async function check() {
  localStorage.setItem(STORE, text.value);
  if (checking) checking.abort();
  checking = new AbortController();
  const status = $("check-status");
  status.textContent = "checking…";
  status.classList.add("busy");
  try {
    const r = await post("/request/check", { request: text.value, filename }, checking.signal);
    showErrors([], r);
  } catch (e) {
    if (e.name === "AbortError") return;  // an invalid request: a 400 problem listing every line (API.md)
    showErrors(e instanceof ApiError ? e.errors : [`the server did not answer (${e.message})`]);
  }
}

function showErrors(errors, r) {
  const status = $("check-status");
  status.classList.remove("busy");
  errorLines = new Map();
  const items = errors.map((msg) => {
    const [line, rest] = lineOf(msg);
    if (line) errorLines.set(line, errorLines.has(line) ? `${errorLines.get(line)}\n${rest}` : rest);
    return el("li", {}, el("button", { type: "button", "data-line": line ?? "", onclick: () => line && goToLine(line) },
      el("b", {}, line ? `line ${line}` : "request"), rest));
  });
  $("errors").replaceChildren(...items);
  if (!errors.length) {
    const jobs = r?.request?.jobs || [];
    status.replaceChildren(el("span", { class: "valid", id: "valid" }, "valid"),
      ` request with ${jobs.length} job(s)${jobs.length ? `: ${jobs.map((j) => j.name).join(", ")}` : ""}`);
  } else {
    status.textContent = `${errors.length} problem(s); select one to go to its line`;
  }
  drawGutter();
}

function planBody(format) { return { request: text.value, filename, format }; }

function planProblem(e) {
  const p = $("plan-problem");
  if (!e) { p.hidden = true; return; }
  p.hidden = false;
  p.textContent = e instanceof ApiError ? e.message : `the server did not answer (${e.message})`;
}

/**
 * Show the report (the bytes `plan -o report.html` writes) in a sandboxed frame. The frame inherits this page's
 * Content-Security-Policy, which refuses the report's inline <style>; the same CSS is applied through a
 * constructed style sheet instead (CSSOM), so the frame shows the report as the file does, and runs no script.
 */
async function viewReport() {
  try {
    const html = await postText("/plan", planBody("html"));
    planProblem(null);
    const css = [];  // taken out before parsing: even a parsed <style> is checked against the page's policy
    const doc = new DOMParser().parseFromString(html.replace(/<style>([\s\S]*?)<\/style>/g, (_, rules) => {
      css.push(rules);
      return "";
    }), "text/html");
    const frame = $("report");
    frame.addEventListener("load", () => {
      const w = frame.contentWindow;
      const sheet = new w.CSSStyleSheet();
      sheet.replaceSync(css.join("\n"));
      frame.contentDocument.adoptedStyleSheets = [sheet];
      frame.style.height = `${frame.contentDocument.documentElement.scrollHeight + 4}px`; // CSSOM, allowed by the CSP
      frame.dataset.loaded = "1";
    }, { once: true });
    frame.dataset.loaded = "";
    frame.srcdoc = `<!DOCTYPE html>\n${doc.documentElement.outerHTML}`;
    $("report-section").hidden = false;
    $("report-section").scrollIntoView();
  } catch (e) { planProblem(e); }
}

async function downloadReport(format) {
  const base = filename.replace(/\.(ya?ml|json)$/i, "");
  try {
    if (format === "json") {
      // the server's bytes, those of `plan -o report.json` (parsed and re-serialised, 730.0 would be 730)
      const body = await postText("/plan", planBody("json"));
      download(`${base}-report.json`, body, "application/json");
    } else {
      const body = await postText("/plan", planBody(format));
      download(`${base}-report.${format}`, body, format === "html" ? "text/html" : "text/markdown");
    }
    planProblem(null);
  } catch (e) { planProblem(e); }
}

async function template() {
  const res = await fetch(`${API}/request/template`);
  text.value = await res.text();
  filename = "request.yaml";
  $("filename-note").textContent = "the commented template: every field, with what it means";
  check();
}

const checkSoon = debounce(check, 400);
text.addEventListener("input", () => { drawGutter(); checkSoon(); });
text.addEventListener("scroll", () => { gutter.scrollTop = text.scrollTop; });
$("template").addEventListener("click", template);
$("upload-button").addEventListener("click", () => $("upload").click());
$("upload").addEventListener("change", async () => {
  const f = $("upload").files[0];
  if (!f) return;
  if (f.size > 1 << 20) { showErrors([`${f.name}: ${f.size.toLocaleString("en-US")} bytes; a request file is at most 1 MB`]); return; }
  text.value = await f.text();
  filename = f.name;
  $("filename-note").textContent = f.name;
  check();
});
$("download-request").addEventListener("click", () => download(filename, text.value, "application/yaml"));
$("view-report").addEventListener("click", viewReport);
$("dl-html").addEventListener("click", () => downloadReport("html"));
$("dl-md").addEventListener("click", () => downloadReport("md"));
$("dl-json").addEventListener("click", () => downloadReport("json"));

const saved = localStorage.getItem(STORE);
if (saved) { text.value = saved; check(); } else template();
drawGutter();
