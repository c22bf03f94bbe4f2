// mpiscope page: one namespace for every module (the Python side concatenates the files of
// scripts.txt in order into one inline script; no module loader, no build step).
"use strict";
const MS = {};

// Okabe-Ito colours: told apart by colour-blind readers too. Index = family code (protocol `families`).
MS.FAMILY_COLORS = ["#0072B2", "#D55E00", "#CC79A7", "#E69F00", "#8C8C8C", "#009E73"];
MS.FAMILY_RGB = MS.FAMILY_COLORS.map((c) => [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)));

MS.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
};

MS.svg = function (tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) if (c) e.append(c);
  return e;
};

const UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];

// A duration in the largest unit that keeps it >= 1, three significant digits.
MS.fmtDur = function (ns) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return "–";
  const a = Math.abs(ns);
  if (a === 0) return "0 s";
  for (const [u, name] of UNITS) {
    if (a >= u || u === 1) {
      const v = ns / u;
      const d = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
      return `${v.toFixed(d)} ${name}`;
    }
  }
  return `${ns} ns`;
};

// A time since the start of the run, precise to `res` ns (the span of a pixel, or a tick step):
// in the largest unit that needs at most `maxDec` decimals for that precision.
MS.fmtTime = function (ns, res, maxDec = 3) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return "–";
  res = Math.max(1, res || 1);
  const a = Math.max(Math.abs(ns), res);
  let k = UNITS.findIndex(([u]) => a >= u);
  const dec = (i) => Math.max(0, Math.ceil(Math.log10(UNITS[i][0] / res) - 1e-9));
  while (k < UNITS.length - 1 && dec(k) > maxDec) k++;
  const unit = UNITS[k], decimals = dec(k);
  return `${MS.groupDigits((ns / unit[0]).toFixed(decimals))} ${unit[1]}`;
};

// An exact instant (a call's entry, a message's send): to the nanosecond.
MS.fmtAt = (ns) => MS.fmtTime(ns, 1, 9);

// 12345.678901 -> "12 345.678 901" (thin spaces): integers from five digits, decimals beyond three.
MS.groupDigits = function (s) {
  const [i, f] = s.split(".");
  const neg = i.startsWith("-"), digits = neg ? i.slice(1) : i;
  const g = digits.length >= 5 ? digits.replace(/\B(?=(\d{3})+$)/g, "\u2009") : digits;
  const fg = f !== undefined && f.length > 3 ? f.replace(/(\d{3})(?=\d)/g, "$1\u2009") : f;
  return `${neg ? "-" : ""}${g}${fg !== undefined ? `.${fg}` : ""}`;
};

MS.fmtBytes = function (b) {
  if (b === null || b === undefined || Number.isNaN(b)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = b, i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  if (i === 0 || Number.isInteger(v)) return `${Math.round(v)} ${units[i]}`;
  return `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
};

MS.fmtCount = function (n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return Math.round(n).toLocaleString("en-US");
};

MS.fmtPct = (p) => (p === null || p === undefined || Number.isNaN(p) ? "–" : `${p.toFixed(p >= 10 ? 1 : 2)} %`);

// Tick step for an axis: 1, 2 or 5 times a power of ten, about `target` units wide.
MS.niceStep = function (target) {
  const p = Math.pow(10, Math.floor(Math.log10(target)));
  const m = target / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
};

// Sequential colour scale for densities: white to deep blue (darker = denser), as 0xAABBGGRR for
// ImageData and as CSS text.
MS.DENSITY_STOPS = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [4, 20, 50]];
MS.densityRGB = function (x) {
  const s = MS.DENSITY_STOPS;
  x = Math.min(1, Math.max(0, x)) * (s.length - 1);
  const i = Math.min(s.length - 2, Math.floor(x));
  const f = x - i;
  return s[i].map((c, k) => Math.round(c + (s[i + 1][k] - c) * f));
};
MS.densityCSS = (x) => `rgb(${MS.densityRGB(x).join(",")})`;
MS.rgba32 = (r, g, b, a = 255) => ((a << 24) | (b << 16) | (g << 8) | r) >>> 0;

// Log scale from (0, max] to [lo, 1]: small values stay visible beside a hot spot.
MS.logScale = function (max, lo = 0.08) {
  const l = Math.log1p(max > 0 ? max : 1);
  return (v) => (v > 0 ? lo + (1 - lo) * Math.log1p(v) / l : 0);
};

MS.shortCall = (name) => (name || "").replace(/^MPI_/, "");

MS.basename = (p) => String(p || "").split("/").pop();

// Errors reach the console (the browser tests watch it) and a banner the user can read.
MS.fail = function (what, err) {
  console.error(`mpiscope: ${what}:`, err);
  const notes = document.getElementById("notes");
  if (notes) notes.append(MS.el("div", { class: "note error" }, `${what}: ${err && err.message ? err.message : err}`));
};
