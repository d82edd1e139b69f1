// SVG charts with the look of the HTML report's (render/svg.py): the same palette, font, grid lines, frame,
// title and budget-marker colour, drawn in the browser from the API's numbers. No plotting library.

import { axisBytes, formatRate, formatTick, formatUsd } from "./format.js";

export const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
  "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"];
export const MARKER = "#d62728";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

function t(x, y, text, size = 11, anchor = "start", color = "#333", weight = "normal", extra = {}) {
  return s("text", { x: x.toFixed(1), y: y.toFixed(1), "font-size": size, "text-anchor": anchor, fill: color,
    "font-weight": weight, ...extra }, text);
}

/** svg.nice_ticks: round tick values covering [lo, hi] (1, 2, 2.5, 5 x 10^k steps). */
export function niceTicks(lo, hi, n = 5) {
  if (hi <= lo) hi = lo + 1;
  const raw = (hi - lo) / Math.max(1, n);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((v) => v >= raw);
  const ticks = [];
  let v = Math.floor(lo / step) * step;
  while ((!ticks.length || ticks[ticks.length - 1] < hi - 1e-9) && ticks.length < 24) {
    ticks.push(Math.round(v * 1e10) / 1e10);
    v += step;
  }
  return ticks;
}

/** svg._byte_ticks: ticks on whole GiB (or MiB, TiB) for byte axes. */
export function byteTicks(hi) {
  let scale = 1;
  while (hi / scale >= 1024 && scale < 1024 ** 5) scale *= 1024;
  return niceTicks(0, hi / scale).map((v) => v * scale);
}

function open(id, title, width, height) {
  const svg = s("svg", { xmlns: NS, id: `chart-${id}`, class: "chart", role: "img",
    "aria-labelledby": `chart-${id}-title`, width, height, viewBox: `0 0 ${width} ${height}`, "font-family": FONT });
  svg.append(s("title", { id: `chart-${id}-title` }, title));
  svg.append(s("rect", { x: 0, y: 0, width, height, fill: "#ffffff" }));
  svg.append(t(12, 20, title, 13, "start", "#111", "600"));
  return svg;
}

function short(label, n) { return label.length <= n ? label : `${label.slice(0, n - 1)}…`; }

/**
 * Horizontal stacked bars of memory, one per device (svg.stacked_bar_chart's look), with a budget line.
 * rows: [{label, segments: [{name, bytes}], budget, capacity}]; series colours follow the segment names' order.
 */
export function memoryBars(id, title, rows, width = 760) {
  const names = [...new Set(rows.flatMap((r) => r.segments.filter((g) => g.bytes > 0).map((g) => g.name)))];
  const totals = rows.map((r) => r.segments.reduce((a, g) => a + Math.max(0, g.bytes), 0));
  const limits = rows.flatMap((r) => [r.budget, r.capacity]).filter((v) => v);
  let hi = Math.max(...totals, ...limits, 1) * 1.05;
  const ticks = byteTicks(hi);
  hi = Math.max(hi, ticks[ticks.length - 1]);
  const left = 150, right = 40, top = 36, row = 40;
  const legendRows = Math.ceil(names.length / 4);
  const height = top + rows.length * row + 30 + legendRows * 18 + 12;
  const pw = width - left - right;
  const x = (v) => left + (v / hi) * pw;
  const svg = open(id, title, width, height);
  for (const tk of ticks) {
    svg.append(s("line", { x1: x(tk).toFixed(1), y1: top, x2: x(tk).toFixed(1), y2: top + rows.length * row, stroke: "#e6e6e6" }));
    svg.append(t(x(tk), top + rows.length * row + 14, axisBytes(tk), 10, "middle", "#555"));
  }
  rows.forEach((r, k) => {
    const y = top + k * row;
    svg.append(t(left - 8, y + row / 2 + 4, short(r.label, 22), 10, "end"));
    let x0 = left;
    for (const g of r.segments) {
      if (g.bytes <= 0) continue;
      const w = (g.bytes / hi) * pw;
      const rect = s("rect", { class: "segment", "data-name": g.name, "data-bytes": g.bytes, x: x0.toFixed(1),
        y: y + 7, width: Math.max(w, 0.5).toFixed(1), height: row - 14, fill: PALETTE[names.indexOf(g.name) % PALETTE.length] });
      rect.append(s("title", {}, `${g.name}: ${axisBytes(g.bytes)}`));
      svg.append(rect);
      x0 += w;
    }
    svg.append(t(x0 + 4, y + row / 2 + 4, axisBytes(totals[k]), 10, "start", "#222"));
    if (r.budget) {
      svg.append(s("line", { class: "limit", x1: x(r.budget).toFixed(1), y1: y + 2, x2: x(r.budget).toFixed(1),
        y2: y + row - 2, stroke: MARKER, "stroke-width": 2.5 }));
    }
    if (r.capacity) {
      svg.append(s("line", { class: "capacity", x1: x(r.capacity).toFixed(1), y1: y + 2, x2: x(r.capacity).toFixed(1),
        y2: y + row - 2, stroke: "#555", "stroke-width": 1.5, "stroke-dasharray": "3 3" }));
    }
  });
  const ly = top + rows.length * row + 32;
  names.forEach((name, i) => {
    const lx = left + (i % 4) * (pw / 4);
    const yy = ly + Math.floor(i / 4) * 18;
    svg.append(s("rect", { x: lx.toFixed(1), y: yy - 9, width: 11, height: 11, fill: PALETTE[i % PALETTE.length] }));
    svg.append(t(lx + 15, yy + 1, short(name, 22), 10));
  });
  if (rows.some((r) => r.budget)) {
    svg.append(s("line", { x1: 14, y1: ly - 8, x2: 14, y2: ly + 2, stroke: MARKER, "stroke-width": 2.5 }));
    svg.append(t(20, ly + 1, "budget", 10, "start", MARKER));
  }
  if (rows.some((r) => r.capacity)) {
    svg.append(s("line", { x1: 74, y1: ly - 8, x2: 74, y2: ly + 2, stroke: "#555", "stroke-width": 1.5, "stroke-dasharray": "3 3" }));
    svg.append(t(80, ly + 1, "memory", 10, "start", "#555"));
  }
  return svg;
}

/**
 * Cost against speed (log-log scatter): serving x = tokens/s, y = $ per hour; training x = hours, y = $ per run.
 * One colour per kind of device; the chosen option ringed. points: [{x, y, label, kind, chosen}];
 * axes: {x: label, y: label, xFmt, yFmt, unit: text after x in the tooltips}.
 */
export function costSpeed(id, title, points, axes, width = 760, height = 380) {
  const xFmt = axes.xFmt || formatRate, yFmt = axes.yFmt || formatUsd;
  const xTick = axes.xTick || formatTick, yTick = (v) => `$${formatTick(v)}`;
  const pts = points.filter((p) => p.x > 0 && p.y > 0);
  if (!pts.length) {
    const svg = open(id, title, 480, 60);
    svg.append(t(12, 44, "no option has both a price and a speed to draw", 11, "start", "#777"));
    return svg;
  }
  const kinds = [...new Set(pts.map((p) => p.kind))];
  const left = 70, right = 30, top = 36, bottom = 62;
  const pw = width - left - right, ph = height - top - bottom;
  const lx = [Math.log10(Math.min(...pts.map((p) => p.x))), Math.log10(Math.max(...pts.map((p) => p.x)))];
  const ly = [Math.log10(Math.min(...pts.map((p) => p.y))), Math.log10(Math.max(...pts.map((p) => p.y)))];
  const xr = [Math.floor(lx[0]), Math.max(Math.ceil(lx[1]), Math.floor(lx[0]) + 1)];
  const yr = [Math.floor(ly[0]), Math.max(Math.ceil(ly[1]), Math.floor(ly[0]) + 1)];
  const sx = (v) => left + ((Math.log10(v) - xr[0]) / (xr[1] - xr[0])) * pw;
  const sy = (v) => top + ph - ((Math.log10(v) - yr[0]) / (yr[1] - yr[0])) * ph;
  const svg = open(id, title, width, height);
  const decades = (r) => { const out = []; for (let e = r[0]; e <= r[1]; e += 1) for (const m of [1, 2, 5]) { const v = m * 10 ** e; if (Math.log10(v) <= r[1] + 1e-9) out.push([v, m === 1]); } return out; };
  // 1-2-5 labels over a few decades; over many, the powers of ten only (the 2s and 5s keep their grid lines)
  for (const [v, major] of decades(yr)) {
    svg.append(s("line", { x1: left, y1: sy(v).toFixed(1), x2: left + pw, y2: sy(v).toFixed(1), stroke: major ? "#e6e6e6" : "#f2f2f2" }));
    if (major || yr[1] - yr[0] <= 3) svg.append(t(left - 6, sy(v) + 4, yTick(v), 10, "end", "#555"));
  }
  for (const [v, major] of decades(xr)) {
    svg.append(s("line", { x1: sx(v).toFixed(1), y1: top, x2: sx(v).toFixed(1), y2: top + ph, stroke: major ? "#e6e6e6" : "#f2f2f2" }));
    if (major || xr[1] - xr[0] <= 2) svg.append(t(sx(v), top + ph + 16, xTick(v), 10, "middle", "#555"));
  }
  svg.append(s("rect", { x: left, y: top, width: pw, height: ph, fill: "none", stroke: "#bbb" }));
  svg.append(t(left + pw / 2, top + ph + 32, axes.x, 11, "middle", "#333"));
  svg.append(t(14, top + ph / 2, axes.y, 11, "middle", "#333", "normal",
    { transform: `rotate(-90 14 ${(top + ph / 2).toFixed(1)})` }));
  for (const p of [...pts.filter((q) => !q.chosen), ...pts.filter((q) => q.chosen)]) { // the chosen one on top
    const c = PALETTE[kinds.indexOf(p.kind) % PALETTE.length];
    const dot = s("circle", { class: p.chosen ? "point chosen" : "point", cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1),
      r: p.chosen ? 6 : 4, fill: c, "fill-opacity": 0.8, stroke: p.chosen ? MARKER : "#fff", "stroke-width": p.chosen ? 2.5 : 1 });
    dot.append(s("title", {}, `${p.label}: ${xFmt(p.x)} ${axes.unit}, ${yFmt(p.y)}`));
    svg.append(dot);
    if (p.chosen) {
      const right = sx(p.x) > left + pw * 0.6;
      svg.append(t(sx(p.x) + (right ? -9 : 9), sy(p.y) - 9, `chosen: ${short(p.label, 34)}`, 10, right ? "end" : "start", MARKER, "600",
        { stroke: "#ffffff", "stroke-width": 3, "paint-order": "stroke" }));
    }
  }
  kinds.forEach((k, i) => {
    const x0 = left + i * 120, y0 = height - 12;
    svg.append(s("circle", { cx: x0 + 5, cy: y0 - 4, r: 5, fill: PALETTE[i % PALETTE.length] }));
    svg.append(t(x0 + 14, y0, k, 10));
  });
  return svg;
}

/**
 * A bookings timeline (Gantt): one row per node, grouped by pool; each hold a bar from start to end whose height is
 * its share of the node's devices (held: dashed outline); a red line at now. rows: [{pool, node, devices, label}];
 * holds: [{id, job, state, node, amount, start: Date, end: Date}]; notes: node -> text at the row's right.
 */
export function gantt(id, title, rows, holds, notes, now, width = 1000) {
  const STATE_COLOUR = { confirmed: PALETTE[0], active: PALETTE[2], held: PALETTE[1] };
  const left = 190, right = 150, top = 40, row = 30;
  const height = top + rows.length * row + 40;
  const svg = open(id, title, width, height);
  const lo = Math.min(...holds.map((h) => h.start.getTime()), now.getTime());
  const hiRaw = Math.max(...holds.map((h) => h.end.getTime()).filter((v) => Number.isFinite(v)), lo + 86400e3);
  const hi = lo + (hiRaw - lo) * 1.02;
  const pw = width - left - right;
  const x = (ms) => left + Math.max(0, Math.min(1, (ms - lo) / (hi - lo))) * pw;
  const days = (hi - lo) / 86400e3;
  for (const tk of niceTicks(0, days)) {
    if (tk > days) continue;
    const xx = x(lo + tk * 86400e3);
    svg.append(s("line", { x1: xx.toFixed(1), y1: top, x2: xx.toFixed(1), y2: top + rows.length * row, stroke: "#e6e6e6" }));
    svg.append(t(xx, top + rows.length * row + 14, formatTick(tk), 10, "middle", "#555"));
  }
  svg.append(t(left + pw / 2, top + rows.length * row + 30,
    `days from ${new Date(lo).toISOString().slice(0, 16).replace("T", " ")} UTC`, 10, "middle", "#555"));
  let pool = null;
  rows.forEach((r, k) => {
    const y = top + k * row;
    if (r.pool !== pool) {
      pool = r.pool;
      svg.append(s("line", { x1: 8, y1: y, x2: width - 8, y2: y, stroke: "#c0c0c0" }));
      svg.append(t(12, y + 12, short(pool, 16), 10, "start", "#555", "600"));
    }
    svg.append(t(left - 8, y + row / 2 + 4, short(r.label, 18), 10, "end"));
    svg.append(s("rect", { x: left, y: y + 3, width: pw, height: row - 6, fill: "none", stroke: "#eeeeee" }));
    const mine = holds.filter((h) => h.node === r.node).sort((a, b) => a.start - b.start);
    const placed = [];
    for (const h of mine) {
      const below = placed.filter((p) => p.start < h.end && h.start < p.end).reduce((a, p) => a + p.amount, 0);
      placed.push(h);
      const hh = (row - 6) * Math.min(1, h.amount / r.devices);
      const yy = y + row - 3 - hh - (row - 6) * Math.min(1, below / r.devices);
      const bar = s("rect", { class: `hold hold-${h.state}`, "data-id": h.id, x: x(h.start.getTime()).toFixed(1),
        y: Math.max(y + 3, yy).toFixed(1), width: Math.max(1, x(h.end.getTime()) - x(h.start.getTime())).toFixed(1),
        height: hh.toFixed(1), fill: STATE_COLOUR[h.state] || "#7f7f7f", "fill-opacity": h.state === "held" ? 0.45 : 0.85,
        stroke: STATE_COLOUR[h.state] || "#7f7f7f", "stroke-dasharray": h.state === "held" ? "3 2" : null });
      bar.append(s("title", {}, `${h.id} ${h.job} (${h.state}): ${h.amount} of ${r.devices} devices`));
      svg.append(bar);
    }
    svg.append(t(left + pw + 8, y + row / 2 + 4, notes[r.node] || "", 10, "start", "#222"));
  });
  const xn = x(now.getTime());
  svg.append(s("line", { class: "now", x1: xn.toFixed(1), y1: top - 4, x2: xn.toFixed(1), y2: top + rows.length * row,
    stroke: MARKER, "stroke-width": 1.5 }));
  svg.append(t(xn, top - 7, "now", 10, "middle", MARKER));
  let lx = width - right - 250;
  for (const [state, colour] of Object.entries(STATE_COLOUR)) {
    svg.append(s("rect", { x: lx, y: 11, width: 11, height: 11, fill: colour, "fill-opacity": state === "held" ? 0.45 : 0.85 }));
    svg.append(t(lx + 15, 21, state, 10));
    lx += 80;
  }
  return svg;
}
