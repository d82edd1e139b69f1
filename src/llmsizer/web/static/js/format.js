// Formatting for people, the same text the CLI prints (units.format_bytes, units.format_count, units.format_seconds,
// render/markdown.format_axis, format_usd, units.format_rate): the pages only render numbers the API returned.
import { pyFixed, pyGeneral, pyGrouped } from "./pyformat.js";

const BIN = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const DEC = ["B", "KB", "MB", "GB", "TB", "PB"];

/** units.format_bytes: GiB/MiB (binary, default) or GB/MB, two decimals, rounded as Python rounds (half to even on
 * the exact value: pyFixed), so the last digit is the CLI's; tests/web/test_format_js.py compares the two. */
export function formatBytes(n, binary = true) {
  if (n === null || n === undefined || Number.isNaN(n)) return "-";
  const units = binary ? BIN : DEC;
  const base = binary ? 1024 : 1000;
  let x = Math.abs(Number(n));
  const sign = n < 0 ? "-" : "";
  let i = 0;
  while (x >= base && i < units.length - 1) { x /= base; i += 1; }
  if (i === 0) return `${sign}${Math.trunc(x)} B`;
  return `${sign}${pyFixed(x, 2)} ${units[i]}`;
}

/** units.compared_places: the fewest decimals, `places` or more, at which each of `values` rounded (as Python rounds:
 * pyFixed) compares with the last as the exact values do. */
function comparedPlaces(values, places) {
  const order = (vs) => vs.slice(0, -1).map((x) => Math.sign(x - vs[vs.length - 1]));
  const want = order(values).join();
  const nonzero = values.filter((v) => v).map(Math.abs);
  const small = nonzero.length ? Math.min(...nonzero) : 1;
  const most = Math.min(40, Math.max(places, 17 - Math.floor(Math.log10(small))));
  for (let p = Math.max(places, 0); p <= most; p += 1) {
    if (order(values.map((v) => Number(pyFixed(v, p)))).join() === want) return p;
  }
  return most;
}

/** units.compared_bytes: sizes read against the last (a need, then what it is judged by), those in the last's unit at
 * one number of decimals with it, enough that the printed order is the exact one; another unit said alone. */
export function comparedBytes(sizes, binary = true) {
  const unitOf = (n) => {
    let x = Math.abs(Number(n)), i = 0;
    while (x >= (binary ? 1024 : 1000) && i < BIN.length - 1) { x /= binary ? 1024 : 1000; i += 1; }
    return i;
  };
  const unit = unitOf(sizes[sizes.length - 1]);
  const size = (binary ? 1024 : 1000) ** unit;
  const same = sizes.map((n) => unitOf(n) === unit);
  const p = unit ? comparedPlaces(sizes.filter((_, k) => same[k]).map((n) => Number(n) / size), 2) : 2;
  return sizes.map((n, k) => (same[k] && unit ? `${pyFixed(Number(n) / size, p)} ${(binary ? BIN : DEC)[unit]}`
    : formatBytes(n, binary)));
}

/** render/markdown.format_axis for byte axes: "16 GiB" rather than "16.00 GiB". */
export function axisBytes(n) { return formatBytes(n).replace(".00 ", " "); }

/** units.format_count: 8.03B, 131.07K. */
export function formatCount(n) {
  if (n === null || n === undefined) return "-";
  for (const [s, v] of [["T", 1e12], ["B", 1e9], ["M", 1e6], ["K", 1e3]]) {
    if (Math.abs(n) >= v) return `${pyFixed(n / v, 2)}${s}`;
  }
  return String(Math.trunc(n));
}

export function formatInt(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }

/** units.format_usd: whole dollars with thousands separators from $100 ("$1,234"), cents below ("$6.88"), rounded
 * as Python's "{:,.0f}" / "{:,.2f}" round (pyGrouped); tests/web/test_format_js.py compares the two. */
export function formatUsd(x) {
  if (x === null || x === undefined) return "-";
  const v = Number(x);
  return `$${pyGrouped(v, Math.abs(v) >= 100 ? 0 : 2)}`;
}

/** units.format_rate: one decimal with thousands separators from 1 up ("129.5", "5,017.8"); below 1 two significant
 * digits, trailing zeros dropped ("0.81", "0.083"), so a small rate never reads 0; tests/web/test_format_js.py
 * compares the two. */
export function formatRate(x) {
  if (x === null || x === undefined) return "-";
  const v = Number(x);
  if (v === 0 || Math.abs(v) >= 1 || !Number.isFinite(v)) return pyGrouped(v, 1);
  const text = pyFixed(v, 1 - Math.floor(Math.log10(Math.abs(v)))).replace(/0+$/, "").replace(/\.$/, "");
  return Math.abs(Number(text)) < 1 ? text : pyGrouped(Number(text), 1);
}

/** render/markdown.format_value(v, "count"): whole with thousands separators from 100 or when whole, else three
 * significant digits ("3,040", "5.54", "0.128"): the plan's and `train`'s spelling of device-hours. */
export function formatFigureCount(v) {
  if (v === null || v === undefined) return "-";
  return v >= 100 || Number.isInteger(v) ? pyGrouped(v, 0) : pyGeneral(v, 3);
}

/** A round axis tick (1, 2, 5 x 10^k): "0.5", "20", "1,000". */
export function formatTick(v) { return Number(v.toPrecision(3)).toLocaleString("en-US", { maximumFractionDigits: 3 }); }

/** units.format_seconds: ms below 1 s, s below 90 s, min below 90 min (one decimal below 10 min), h below 2 days, days below two years
 * of 8760 h (units.HOURS_PER_YEAR), then years; no months (a 730 h month is no calendar month); tests/web/test_format_js.py compares the two. */
function secondsUnit(s) {
  if (s < 1) return [0.001, "ms", 0];
  if (s < 90) return [1, "s", 1];
  if (s < 600) return [60, "min", 1];
  if (s < 5400) return [60, "min", 0];
  if (s < 2 * 86400) return [3600, "h", 1];
  if (s < 2 * 8760 * 3600) return [86400, "days", 1];
  return [3600 * 8760, "years", 1];
}

export function formatSeconds(s) {
  if (s === null || s === undefined) return "-";
  const [size, name, places] = secondsUnit(s);
  return `${pyFixed(s / size, places)} ${name}`;
}

/** units.format_seconds_range: both ends in the low end's unit ("4.8 - 8.8 h"). */
export function formatSecondsRange(low, high) {
  const [size, name, places] = secondsUnit(low);
  return `${pyFixed(low / size, places)} - ${pyFixed(high / size, places)} ${name}`;
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
