// Formatting for people, the same text the CLI prints (units.format_bytes, units.format_count, units.format_seconds,
// render/markdown.format_axis, format_usd): the pages only render numbers the API returned.

const BIN = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const DEC = ["B", "KB", "MB", "GB", "TB", "PB"];

/** units.format_bytes: GiB/MiB (binary, default) or GB/MB, two decimals. */
export function formatBytes(n, binary = true) {
  if (n === null || n === undefined || Number.isNaN(n)) return "-";
  const units = binary ? BIN : DEC;
  const base = binary ? 1024 : 1000;
  let x = Math.abs(Number(n));
  const sign = n < 0 ? "-" : "";
  let i = 0;
  while (x >= base && i < units.length - 1) { x /= base; i += 1; }
  if (i === 0) return `${sign}${Math.trunc(x)} B`;
  return `${sign}${x.toFixed(2)} ${units[i]}`;
}

/** render/markdown.format_axis for byte axes: "16 GiB" rather than "16.00 GiB". */
export function axisBytes(n) { return formatBytes(n).replace(".00 ", " "); }

/** units.format_count: 8.03B, 131.07K. */
export function formatCount(n) {
  if (n === null || n === undefined) return "-";
  for (const [s, v] of [["T", 1e12], ["B", 1e9], ["M", 1e6], ["K", 1e3]]) {
    if (Math.abs(n) >= v) return `${(n / v).toFixed(2)}${s}`;
  }
  return String(Math.trunc(n));
}

export function formatInt(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }

export function formatUsd(x) {
  if (x === null || x === undefined) return "-";
  if (Math.abs(x) >= 100) return `$${Math.round(x).toLocaleString("en-US")}`;
  return `$${x.toFixed(2)}`;
}

export function formatRate(x) {
  if (x === null || x === undefined) return "-";
  if (x >= 100) return Math.round(x).toLocaleString("en-US");
  if (x >= 10) return x.toFixed(1);
  return x.toPrecision(2);
}

/** A round axis tick (1, 2, 5 x 10^k): "0.5", "20", "1,000". */
export function formatTick(v) { return Number(v.toPrecision(3)).toLocaleString("en-US", { maximumFractionDigits: 3 }); }

/** units.format_seconds: ms below 1 s, s below 90 s, min below 90 min (one decimal below 10 min), h below 2 days, days below 120 days, then
 * months of 730 h (units.HOURS_PER_MONTH) below 24 months, then years of 8760 h (units.HOURS_PER_YEAR); tests/web/test_format_js.py compares the two. */
export function formatSeconds(s) {
  if (s === null || s === undefined) return "-";
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 90) return `${s.toFixed(1)} s`;
  if (s < 600) return `${(s / 60).toFixed(1)} min`;
  if (s < 5400) return `${(s / 60).toFixed(0)} min`;
  if (s < 2 * 86400) return `${(s / 3600).toFixed(1)} h`;
  if (s < 120 * 86400) return `${(s / 86400).toFixed(1)} days`;
  if (s < 24 * 730 * 3600) return `${(s / 3600 / 730).toFixed(1)} months`;
  return `${(s / 3600 / 8760).toFixed(1)} years`;
}

/** Element builder: el("td", {class: "num"}, "text", child...). Text is set as text, never parsed as HTML. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** An assumption's value as every other surface writes it (render/text.py, html.py, markdown.py: Python's str of
 * the value): a boolean True / False, nothing None; the rest as the JSON holds it. */
export function assumptionValue(v) {
  if (v === true) return "True";
  if (v === false) return "False";
  if (v === null || v === undefined) return "None";
  return String(v);
}
