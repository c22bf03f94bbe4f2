// Global density view (S-CAT 003 Fig. 5): ranks top to bottom in increasing id, the whole run
// left to right in the 1024 bins of the level-0 bin tile; darker = denser, blank = nothing.
// Drawn as a ranks x bins image scaled without smoothing, so it costs the same for any trace.
"use strict";

MS.METRICS = {
  bytes: { label: "bytes sent + received per bin", fmt: MS.fmtBytes, log: true },
  msgs: { label: "messages sent + received per bin", fmt: MS.fmtCount, log: true },
  mpi: { label: "fraction of the bin in MPI", fmt: (v) => MS.fmtPct(100 * v), log: false },
};

MS.densityValues = function (tile, metric) {
  const c = tile.tables.bins.cols;
  if (metric === "mpi") return Float32Array.from(c.mpi, (v) => v / 255);
  return c[metric];
};

MS.Density = class {
  // opts: {spanScale: ns the full width stands for (Compare: the longer run), axis: draw a time axis}
  constructor(host, data, tile, opts) {
    this.host = host;
    this.data = data;
    this.tile = tile;
    this.opts = opts || {};
    this.metric = "bytes";
    this.ranks = tile.attrs.ranks;
    this.bins = tile.attrs.bins;
    this.span = data.meta.span_ns;
    this.canvas = MS.el("canvas", { class: "density-canvas" });
    this.tooltip = MS.el("div", { class: "tooltip", hidden: true });
    host.append(this.canvas, this.tooltip);
    this.ctx = this.canvas.getContext("2d");
    this.view = null;
    this.onzoom = null;
    this.canvas.addEventListener("pointerdown", (e) => this.onDown(e));
    this.canvas.addEventListener("pointermove", (e) => this.onMove(e));
    this.canvas.addEventListener("pointerup", (e) => this.onUp(e));
    this.canvas.addEventListener("pointerleave", () => { this.tooltip.hidden = true; });
    new ResizeObserver(() => this.draw()).observe(host);
  }

  setMetric(m) { this.metric = m; this.image = null; this.draw(); }
  // A new time-line window only moves the outline: the bins' image is kept.
  setView(vs, ve) {
    this.view = [vs, ve];
    if (!this.pending) this.pending = requestAnimationFrame(() => { this.pending = null; this.draw(); });
  }

  // ranks x bins image of the current metric, and its maximum (cached until the metric changes).
  binImage() {
    if (this.image) return this.image;
    const vals = MS.densityValues(this.tile, this.metric), m = MS.METRICS[this.metric];
    let max = 0;
    for (let i = 0; i < vals.length; i++) if (vals[i] > max) max = vals[i];
    const scale = m.log ? MS.logScale(max) : (v) => (max > 0 ? v / max : 0);
    // more ranks than pixel rows: a row shows the densest rank of its group (hot spots stay)
    const group = this.group(), rows = Math.ceil(this.ranks / group), nb = this.bins;
    const img = new ImageData(nb, rows), px = new Uint32Array(img.data.buffer);
    const lut = [];
    for (let k = 0; k <= 255; k++) lut.push(MS.rgba32(...MS.densityRGB(k / 255)));
    const top = group === 1 ? vals : new Float32Array(rows * nb);
    if (group > 1) {
      for (let r = 0; r < this.ranks; r++) {
        const o = Math.floor(r / group) * nb;
        for (let b = 0; b < nb; b++) top[o + b] = Math.max(top[o + b], vals[r * nb + b]);
      }
    }
    const blank = MS.rgba32(255, 255, 255);
    for (let i = 0; i < rows * nb; i++) px[i] = top[i] > 0 ? lut[Math.max(1, Math.round(255 * scale(top[i])))] : blank;
    const canvas = new OffscreenCanvas(nb, rows);
    canvas.getContext("2d").putImageData(img, 0, 0);
    this.image = { canvas, max };
    return this.image;
  }

  // Ranks per pixel row: 1 while rows of 1 device pixel fit in MAX_ROWS_CSS.
  group() {
    const dpr = window.devicePixelRatio || 1;
    return Math.max(1, Math.ceil(this.ranks / Math.round(MS.Density.MAX_ROWS_CSS * dpr)));
  }

  geometry() {
    const dpr = window.devicePixelRatio || 1, cssW = Math.max(320, this.host.clientWidth);
    const rows = Math.ceil(this.ranks / this.group());
    const rowCss = Math.max(1 / dpr, Math.min(24, MS.Density.MAX_ROWS_CSS / rows));
    const rowsCss = Math.max(24, rows * rowCss), axis = this.opts.axis === false ? 0 : 22;
    const x0 = Math.round(MS.TL.GUTTER * dpr), full = Math.max(16, Math.round((cssW - MS.TL.GUTTER - MS.TL.PAD_R) * dpr));
    const cols = Math.round(full * this.span / (this.opts.spanScale || this.span));
    return { dpr, cssW, cssH: rowsCss + axis + 10, x0, cols, full, rowsDev: Math.round(rowsCss * dpr), top: Math.round(6 * dpr) };
  }

  draw() {
    const g = (this.g = this.geometry()), c = this.canvas;
    const W = Math.round(g.cssW * g.dpr), H = Math.round(g.cssH * g.dpr);
    if (c.width !== W || c.height !== H) {
      c.width = W;
      c.height = H;
      c.style.width = `${g.cssW}px`;
      c.style.height = `${g.cssH}px`;
    }
    const ctx = this.ctx, m = MS.METRICS[this.metric], { canvas: off, max } = this.binImage();
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.fillStyle = "#f3f4f6";
    ctx.fillRect(g.x0, g.top, g.full, g.rowsDev);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, g.x0, g.top, g.cols, g.rowsDev);
    ctx.strokeStyle = "#d5dae1";
    ctx.lineWidth = g.dpr;
    ctx.strokeRect(g.x0 - 0.5 * g.dpr, g.top - 0.5 * g.dpr, g.cols + g.dpr, g.rowsDev + g.dpr);
    this.drawLabels(ctx, g);
    this.drawViewport(ctx, g);
    if (this.opts.legend && this.legendOf !== this.metric) {
      MS.densityLegend(this.opts.legend, m, max);
      this.legendOf = this.metric;
    }
  }

  drawLabels(ctx, g) {
    const dpr = g.dpr, rowH = g.rowsDev / this.ranks;
    ctx.font = `${Math.round(11 * dpr)}px ${MS.FONT}`;
    ctx.fillStyle = "#374151";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    let every = 1;
    while (every * rowH < 13 * dpr) every *= 2;
    for (let r = 0; r < this.ranks; r += every) ctx.fillText(String(r), g.x0 - 8 * dpr, g.top + (r + 0.5) * rowH);
    if (this.opts.axis === false) return;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillStyle = "#4b5563";
    const fullSpan = this.opts.spanScale || this.span;
    const step = MS.niceStep(fullSpan * 110 * dpr / g.full);
    for (let t = 0; t <= fullSpan * 1.0000001; t += step) {
      const x = g.x0 + t / fullSpan * g.full;
      ctx.fillRect(Math.round(x), g.top + g.rowsDev, dpr, 4 * dpr);
      ctx.fillText(MS.fmtTime(t, step), Math.min(Math.max(x, g.x0 + 20 * dpr), g.x0 + g.full - 20 * dpr), g.top + g.rowsDev + 6 * dpr);
    }
  }

  // The time-line's window, outlined.
  drawViewport(ctx, g) {
    if (!this.view || (this.view[0] <= 0 && this.view[1] >= this.span)) return;
    const x0 = g.x0 + this.view[0] / this.span * g.cols, x1 = g.x0 + this.view[1] / this.span * g.cols;
    ctx.fillStyle = "rgba(220, 38, 38, 0.10)";
    ctx.fillRect(x0, g.top, Math.max(g.dpr, x1 - x0), g.rowsDev);
    ctx.strokeStyle = "#dc2626";
    ctx.lineWidth = 1.5 * g.dpr;
    ctx.strokeRect(x0, g.top + 0.75 * g.dpr, Math.max(2 * g.dpr, x1 - x0), g.rowsDev - 1.5 * g.dpr);
  }

  binAt(e) {
    const b = this.canvas.getBoundingClientRect(), g = this.g;
    const x = (e.clientX - b.left) * g.dpr - g.x0, y = (e.clientY - b.top) * g.dpr - g.top;
    if (x < 0 || x >= g.cols || y < 0 || y >= g.rowsDev) return null;
    return { bin: Math.floor(x / g.cols * this.bins), rank: Math.floor(y / g.rowsDev * this.ranks), x };
  }
  binTime(bin) { return [bin * this.span / this.bins, (bin + 1) * this.span / this.bins]; }

  onDown(e) {
    const hit = this.binAt(e);
    if (!hit || e.button !== 0) return;
    this.canvas.setPointerCapture(e.pointerId);
    this.drag = { x0: hit.x, x1: hit.x, bin: hit.bin };
  }
  onMove(e) {
    const hit = this.binAt(e);
    if (this.drag && hit) { this.drag.x1 = hit.x; }
    if (!hit) { this.tooltip.hidden = true; return; }
    const [t0, t1] = this.binTime(hit.bin), v = MS.densityValues(this.tile, this.metric)[hit.rank * this.bins + hit.bin];
    this.tooltip.textContent = `rank ${hit.rank} · ${MS.fmtTime(t0, t1 - t0)}–${MS.fmtTime(t1, t1 - t0)} · ${MS.METRICS[this.metric].fmt(v)}`;
    this.tooltip.hidden = false;
    const hb = this.host.getBoundingClientRect();
    let x = e.clientX - hb.left + 12;
    if (x + this.tooltip.offsetWidth > hb.width) x = e.clientX - hb.left - this.tooltip.offsetWidth - 8;
    this.tooltip.style.transform = `translate(${Math.round(x)}px, ${Math.round(e.clientY - hb.top + 14)}px)`;
  }
  onUp() {
    const d = this.drag;
    this.drag = null;
    if (!d || !this.onzoom) return;
    const g = this.g;
    if (Math.abs(d.x1 - d.x0) > 3 * g.dpr) {
      const a = Math.min(d.x0, d.x1) / g.cols * this.span, b = Math.max(d.x0, d.x1) / g.cols * this.span;
      this.onzoom(a, b);
    } else {
      const [t0, t1] = this.binTime(d.bin);
      this.onzoom(t0, t1);
    }
  }

  // The bin with the highest value of the current metric (ties: the first in rank, then time order).
  darkest() {
    const vals = MS.densityValues(this.tile, this.metric);
    let best = 0;
    for (let i = 1; i < vals.length; i++) if (vals[i] > vals[best]) best = i;
    const rank = Math.floor(best / this.bins), bin = best % this.bins, [t0, t1] = this.binTime(bin);
    return { rank, bin, t_start: t0, t_end: t1, value: vals[best], metric: this.metric };
  }
};

MS.Density.MAX_ROWS_CSS = 300;

MS.densityLegend = function (host, metric, max) {
  const stops = [];
  for (let k = 0; k <= 10; k++) stops.push(`${MS.densityCSS(k / 10)} ${k * 10}%`);
  host.replaceChildren(
    MS.el("span", { class: "ls-label" }, metric.log ? "0" : "0 %"),
    MS.el("span", { class: "ls-ramp", style: `background:linear-gradient(90deg, ${stops.join(",")})` }),
    MS.el("span", { class: "ls-label" }, `${metric.fmt(max)}`),
    MS.el("span", { class: "ls-what" }, `${metric.label}${metric.log ? " (log scale)" : ""}`));
};
