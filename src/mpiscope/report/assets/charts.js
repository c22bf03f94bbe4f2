// Small charts and tables, hand-written: four kinds (stacked rank bars, a sortable table, a heat
// map, a histogram) that share the page's colours and log scales; a chart library would bring more
// code than these and still need our heat map and scales.
"use strict";

MS.charts = {};

// Per rank: computation (light) then MPI split by family, to scale of the longest rank.
MS.charts.rankBars = function (host, rows, opts) {
  const n = rows.length;
  if (!n) { host.append(MS.el("p", { class: "muted" }, "No rank recorded.")); return; }
  // Up to 140 ranks a bar of at least 3 units each; beyond, a line each in 420 units, so that 1,024
  // ranks draw as one chart of the spread across ranks (outliers stand out as lines), not a bar
  // chart 4,000 pixels tall; each line still names its rank and times on hover.
  const thin = n > 140;
  const rowH = thin ? 420 / n : Math.max(3, Math.min(20, Math.floor(420 / n))), gap = rowH >= 8 ? 3 : rowH >= 5 ? 1 : 0;
  const labelW = 46, valueW = thin ? 8 : 132, W = 640, plotW = W - labelW - valueW;
  const total = (r) => r.parts.reduce((a, p) => a + p, 0);
  const max = Math.max(1, ...rows.map(total));
  const svg = MS.svg("svg", { viewBox: `0 0 ${W} ${n * rowH + 4}`, class: "chart", role: "img",
                              "aria-label": opts.label || "per-rank bars", preserveAspectRatio: "xMinYMin meet" });
  // labels at a power-of-two step when the lines are thin (rank counts are mostly powers of two)
  const every = thin ? 2 ** Math.ceil(Math.log2(13 / rowH)) : Math.max(1, Math.ceil(13 / rowH));
  rows.forEach((r, i) => {
    const y = i * rowH + 2;
    let x = labelW;
    const g = MS.svg("g", {});
    r.parts.forEach((p, k) => {
      const w = (p / max) * plotW;
      if (w > 0) g.append(MS.svg("rect", { x: x.toFixed(2), y: thin ? y.toFixed(3) : y, width: w.toFixed(2),
                                           height: thin ? rowH.toFixed(3) : rowH - gap, fill: opts.colors[k] }));
      x += w;
    });
    g.append(MS.svg("title", { text: `${r.label}: ${r.parts.map((p, k) => `${opts.names[k]} ${MS.fmtDur(p)}`).join(", ")}` }));
    svg.append(g);
    if (i % every === 0) {
      svg.append(MS.svg("text", { x: labelW - 6, y: thin ? Math.max(6, y) : y + (rowH - gap) / 2, class: "ax", "text-anchor": "end", "dominant-baseline": "central", text: r.label }));
      if (r.note && !thin) svg.append(MS.svg("text", { x: W - valueW + 8, y: y + (rowH - gap) / 2, class: "ax", "dominant-baseline": "central", text: r.note }));
    }
  });
  const used = opts.names.map((_, k) => rows.some((r) => r.parts[k] > 0));
  host.append(svg, MS.charts.legend(opts.names.filter((_, k) => used[k]), opts.colors.filter((_, k) => used[k])));
  if (thin) host.append(MS.el("p", { class: "muted" }, `${n.toLocaleString("en-US")} ranks, a line each: point at one for its times.`));
};

MS.charts.legend = function (names, colors) {
  return MS.el("div", { class: "legend" }, names.map((nm, k) => MS.el("span", { class: "lg" },
    MS.el("span", { class: "sw", style: `background:${colors[k]}` }), nm)));
};

// columns: [{key, label, fmt?, num?, title?}]; click a header to sort.
MS.charts.table = function (host, columns, rows, opts) {
  opts = opts || {};
  let sortKey = opts.sort || null, desc = true;
  const wrap = MS.el("div", {});
  const render = () => {
    const sorted = sortKey === null ? rows.slice() : rows.slice().sort((a, b) => {
      const x = a[sortKey], y = b[sortKey];
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return desc ? -c : c;
    });
    const limit = opts.limit || 500;
    const head = MS.el("tr", {}, columns.map((c) => MS.el("th", {
      class: (c.num ? "num " : "") + (c.key === sortKey ? (desc ? "sorted desc" : "sorted asc") : ""),
      title: c.title || "Sort", onclick: () => { desc = c.key === sortKey ? !desc : true; sortKey = c.key; render(); },
    }, c.label)));
    const body = sorted.slice(0, limit).map((r) => MS.el("tr", {}, columns.map((c) => {
      const v = r[c.key];
      return MS.el("td", { class: c.num ? "num" : c.cls || null, title: c.full ? String(v) : null }, c.fmt ? c.fmt(v, r) : v === null || v === undefined ? "–" : String(v));
    })));
    const table = MS.el("table", { class: "data" }, MS.el("thead", {}, head), MS.el("tbody", {}, body));
    wrap.replaceChildren(table);
    if (sorted.length > limit) wrap.append(MS.el("p", { class: "muted" }, `${sorted.length - limit} more rows not shown.`));
  };
  render();
  host.append(wrap);
};

// Heat map of an N x N matrix (row = source, column = destination), log colour scale.
MS.charts.matrix = function (host, M, metric) {
  host.replaceChildren();
  const vals = M[metric] || [];
  const n = vals.length, block = M.block || 1;
  if (!n || (M.one_sided && !vals.some((row) => row.some((v) => v > 0)))) {
    host.append(MS.el("p", { class: "muted" }, metric === "one_sided" ? "No one-sided transfer."
      : M.one_sided ? "No point-to-point message: this run's ranks communicated one-sided (see one-sided bytes)."
        : "No point-to-point message."));
    return;
  }
  let max = 0;
  for (const row of vals) for (const v of row) if (v > max) max = v;
  const scale = MS.logScale(max);
  // room for the longest rank number left of the rows and between the columns' labels (~7 px a digit)
  const digits = String((n - 1) * block).length;
  const dpr = window.devicePixelRatio || 1, size = Math.min(420, Math.max(160, n * 14)), pad = Math.max(40, 18 + 7 * digits);
  const canvas = MS.el("canvas", { class: "matrix-canvas" });
  canvas.width = (size + pad + 6) * dpr;
  canvas.height = (size + pad + 6) * dpr;
  canvas.style.width = `${size + pad + 6}px`;
  canvas.style.height = `${size + pad + 6}px`;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  const cell = size / n;
  ctx.fillStyle = "#f9fafb";
  ctx.fillRect(pad, pad, size, size);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    const v = vals[i][j];
    if (!(v > 0)) continue;
    ctx.fillStyle = MS.densityCSS(scale(v));
    ctx.fillRect(pad + j * cell, pad + i * cell, Math.ceil(cell), Math.ceil(cell));
  }
  ctx.strokeStyle = "#d5dae1";
  ctx.strokeRect(pad - 0.5, pad - 0.5, size + 1, size + 1);
  ctx.fillStyle = "#4b5563";
  ctx.font = `11px ${MS.FONT}`;
  const every = Math.max(1, Math.ceil(16 / cell)), everyColumn = every * Math.ceil((7 * digits + 8) / (every * cell));
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let i = 0; i < n; i += every) ctx.fillText(String(i * block), pad - 5, pad + (i + 0.5) * cell);
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  for (let j = 0; j < n; j += everyColumn) ctx.fillText(String(j * block), pad + (j + 0.5) * cell, pad - 4);
  ctx.fillStyle = "#9aa3af";
  ctx.font = `600 10px ${MS.FONT}`;
  ctx.textAlign = "left";
  ctx.fillText("DESTINATION →", pad, 12);
  ctx.save();
  ctx.translate(3, pad);  // rotated, its glyphs take x 3-11: the rows' labels start at 13 (pad)
  ctx.rotate(Math.PI / 2);
  ctx.fillText("SOURCE →", 0, 0);
  ctx.restore();
  const wrap = MS.el("div", { class: "matrix-wrap" });
  const tip = MS.el("div", { class: "tooltip", hidden: true });
  canvas.addEventListener("pointermove", (e) => {
    const b = canvas.getBoundingClientRect(), x = e.clientX - b.left - pad, y = e.clientY - b.top - pad;
    const i = Math.floor(y / cell), j = Math.floor(x / cell);
    if (i < 0 || j < 0 || i >= n || j >= n) { tip.hidden = true; return; }
    const fmt = metric === "messages" ? MS.fmtCount : MS.fmtBytes;
    const who = (k) => (block > 1 ? `ranks ${k * block}–${k * block + block - 1}` : `rank ${k}`);
    tip.textContent = `${who(i)} → ${who(j)}: ${fmt(vals[i][j])}`;
    tip.hidden = false;
    tip.style.transform = `translate(${Math.round(e.clientX - b.left + 12)}px, ${Math.round(e.clientY - b.top + 12)}px)`;
  });
  canvas.addEventListener("pointerleave", () => { tip.hidden = true; });
  const legend = MS.el("div", { class: "legend-scale" });
  MS.densityLegend(legend, { fmt: metric === "messages" ? MS.fmtCount : MS.fmtBytes, log: true,
                             label: `${metric === "one_sided" ? "one-sided bytes" : metric} from row to column${block > 1 ? `, blocks of ${block} ranks` : ""}` }, max);
  wrap.append(canvas, tip);
  host.append(wrap, legend);
};

// Message sizes: one bar per power-of-two bin, height = messages.
MS.charts.histogram = function (host, bins) {
  if (!bins || !bins.length) { host.append(MS.el("p", { class: "muted" }, "No point-to-point message.")); return; }
  // padB holds the longest rotated label ("512 KiB–1 MiB": ~85 px at -35°, 12 px below the axis)
  const W = 560, H = 240, padL = 60, padB = 68, padT = 10;  // padL: a count of six digits and its comma
  const n = bins.length, bw = Math.min(64, (W - padL - 8) / n), max = Math.max(1, ...bins.map((b) => b.count));
  const left = padL + ((W - padL - 8) - n * bw) / 2;
  const svg = MS.svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "message sizes" });
  const ticks = [0, 0.5, 1].map((f) => Math.round(max * f));
  for (const t of ticks) {
    const y = padT + (H - padT - padB) * (1 - t / max);
    svg.append(MS.svg("line", { x1: padL, x2: W - 8, y1: y, y2: y, class: "grid" }),
      MS.svg("text", { x: padL - 6, y, class: "ax", "text-anchor": "end", "dominant-baseline": "central", text: MS.fmtCount(t) }));
  }
  bins.forEach((b, i) => {
    const h = (H - padT - padB) * (b.count / max), x = left + i * bw;
    svg.append(MS.svg("rect", { x: x + 2, y: H - padB - h, width: Math.max(1, bw - 4), height: h, fill: MS.FAMILY_COLORS[0], rx: 2 },
      MS.svg("title", { text: `${MS.fmtBytes(b.lo_bytes)} – ${MS.fmtBytes(b.hi_bytes)}: ${MS.fmtCount(b.count)} messages, ${MS.fmtBytes(b.bytes)}` })));
    if (n <= 16 || i % Math.ceil(n / 16) === 0) {
      svg.append(MS.svg("text", { x: x + bw / 2, y: H - padB + 12, class: "ax", "text-anchor": "end",
        transform: `rotate(-35 ${x + bw / 2} ${H - padB + 12})`, text: `${MS.fmtBytes(b.lo_bytes)}–${MS.fmtBytes(b.hi_bytes)}` }));
    }
  });
  host.append(svg, MS.el("p", { class: "muted" }, "Point-to-point messages by size (power-of-two bins); hover a bar for its bytes."));
};
