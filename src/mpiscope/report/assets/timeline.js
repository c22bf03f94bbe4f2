// The time-line: ranks top to bottom, time left to right. One mapping between (time, rank) and
// device pixels (speedscope's config-space-to-physical transform) is used by drawing, hit tests
// and the test hooks alike. Redraws are scheduled on animation frames and cost O(pixels) plus
// O(visible events) in the single-event mode, which is entered only below MAX_EVENTS.
"use strict";

MS.TL = {
  GUTTER: 64, AXIS: 30, PAD_R: 14, PAD_B: 6,   // CSS px
  MAX_EVENTS: 40000,          // single calls drawn at most (estimated from the bins' `starts`)
  MIN_LANE: 4,                // device px of a thread's lane in its rank's row (rankLayout)
  MAX_EVENT_TILES: 48,        // event tiles a view may need before we stay with bins
  MAX_MESSAGES: 20000,        // message lines drawn at most
  MIN_SPAN_NS: 200,
  LABEL_PX: 110,              // CSS px per time-axis label
};

// The note over a view the report holds no single calls for, or only for part of.
MS.TL.noDetailNote = function (heldShare) {
  if (heldShare <= 0) return "No single calls are embedded for this window: run `mpiscope view` on the trace to see them.";
  return `Single calls are embedded for ${Math.round(Math.min(heldShare, 0.99) * 100)} % of this window (green on the axis): ` +
    "zoom into that part, or run `mpiscope view` to see them all.";
};

// Pixel rows of `ranks` ranks from rank `first`: one rank per row while they fit (rows of at least
// 1 device px), else `group` consecutive ranks share a 1-pixel row and their shares are averaged.
// With `threads` (per rank, the threads that called MPI) a rank's row holds a lane per thread for
// single calls, as many as are MIN_LANE px tall (further threads share the last lane): drawn in
// one row, one thread's calls hid another's. Paint row p = row * LM + lane; box(p) is its pixel
// rows [y0, y1) (y1 - y0 = the row's height without its gap when the row has one lane).
MS.rankLayout = function (ranks, rowsDev, maxRowDev, first = 0, threads = null) {
  let group = 1, rowH = Math.min(maxRowDev, Math.floor(rowsDev / ranks));
  if (rowH < 1) { group = Math.ceil(ranks / rowsDev); rowH = 1; }
  const rows = Math.ceil(ranks / group), hh = rowH - (rowH >= 5 ? 1 : 0);
  const most = group === 1 && threads ? Math.max(1, Math.floor(hh / MS.TL.MIN_LANE)) : 1;
  const lanesIn = (row) => (most > 1 ? Math.max(1, Math.min(most, threads[first + row] || 1)) : 1);
  let LM = 1;
  for (let row = 0; most > 1 && row < rows; row++) LM = Math.max(LM, lanesIn(row));
  const rowOf = (r) => Math.floor((r - first) / group);
  return {
    first, ranks, rows, rowH, group, height: rows * rowH, LM, lanesIn, rowOf,
    firstRank: (row) => first + row * group,
    ranksIn: (row) => Math.min(group, ranks - row * group),
    shows: (r) => r >= first && r < first + ranks,
    paintRow: (r, thread) => (LM > 1 ? rowOf(r) * LM + Math.min(thread, lanesIn(rowOf(r)) - 1) : rowOf(r)),
    box: (p) => {
      const row = Math.floor(p / LM), k = p - row * LM, n = lanesIn(row), y = row * rowH;
      if (n === 1) return [y, y + hh];
      // a pixel between lanes where they are tall enough to spare it
      return [y + Math.floor(k * hh / n), y + Math.floor((k + 1) * hh / n) - (k < n - 1 && hh / n >= 6 ? 1 : 0)];
    },
  };
};

MS.Timeline = class {
  constructor(host, data, source) {
    this.data = data;
    this.source = source;
    this.span = Math.max(1, data.meta.span_ns);
    this.ranks = Math.max(1, data.meta.ranks);
    this.callFamily = Uint8Array.from(data.call_family || []);
    this.pyr = data.pyramid;
    this.vs = 0;
    this.ve = this.span;
    this.r0 = 0;                 // the ranks in view: [r0, r1)
    this.r1 = this.ranks;
    this.rankListeners = [];
    this.redraws = [];
    this.firstPaintMs = null;
    this.waiters = [];
    this.frame = null;           // what the last draw showed (mode, tiles, message segments)
    this.listeners = [];
    this.host = host;
    this.canvas = MS.el("canvas", { class: "tl-main" });
    this.overlay = MS.el("canvas", { class: "tl-overlay" });
    this.tooltip = MS.el("div", { class: "tooltip", hidden: true });
    host.append(this.canvas, this.overlay, this.tooltip);
    this.ctx = this.canvas.getContext("2d");
    this.octx = this.overlay.getContext("2d");
    this.resize();
    new ResizeObserver(() => { if (this.resize()) this.invalidate(); }).observe(host);
    source.listeners.push(() => this.invalidate());
  }

  // ---- geometry -------------------------------------------------------------------------------
  resize(ranksChanged) {
    const dpr = window.devicePixelRatio || 1, T = MS.TL;
    const cssW = Math.max(320, this.host.clientWidth);
    const rowsCss = Math.max(Math.min(120, this.ranks * 40), Math.min(560, this.ranks * 22));
    const threads = this.data.threads || null;
    const whole = MS.rankLayout(this.ranks, Math.round(rowsCss * dpr), Math.round(40 * dpr), 0, threads);
    // A range of ranks in view shares the whole run's height among its rows: the page does not move.
    const count = this.r1 - this.r0;
    const layout = count < this.ranks ? MS.rankLayout(count, whole.height, whole.height, this.r0, threads) : whole;
    const cssH = T.AXIS + whole.height / dpr + T.PAD_B;
    if (!ranksChanged && this.g && this.g.cssW === cssW && this.g.dpr === dpr && this.g.layout.height === layout.height) return false;
    const x0 = Math.round(T.GUTTER * dpr), cols = Math.max(16, Math.round((cssW - T.GUTTER - T.PAD_R) * dpr));
    this.g = { dpr, cssW, cssH, layout, x0, cols, top: Math.round(T.AXIS * dpr) };
    for (const c of [this.canvas, this.overlay]) {
      c.width = Math.round(cssW * dpr);
      c.height = Math.round(cssH * dpr);
      c.style.width = `${cssW}px`;
      c.style.height = `${cssH}px`;
    }
    this.host.style.height = `${cssH}px`;
    this.acc = new Float32Array(layout.rows * layout.LM * cols * MS.paint.NF);
    this.image = this.ctx.createImageData(cols, layout.height);
    this.img32 = new Uint32Array(this.image.data.buffer);
    return true;
  }

  // time (ns from t0) -> device x, and back; rank -> device y of its row's centre
  xDev(t) { return this.g.x0 + (t - this.vs) * this.g.cols / (this.ve - this.vs); }
  tOfDev(x) { return this.vs + (x - this.g.x0) * (this.ve - this.vs) / this.g.cols; }
  yDev(rank) { const L = this.g.layout; return this.g.top + (L.rowOf(rank) + 0.5) * L.rowH; }
  rankOfDev(y) {
    const L = this.g.layout, row = Math.floor((y - this.g.top) / L.rowH);
    return row < 0 || row >= L.rows ? -1 : L.firstRank(row);
  }

  // Test hooks speak CSS pixels of the viewport, ready for a real mouse move.
  xOf(t) { const b = this.canvas.getBoundingClientRect(); return b.left + this.xDev(t) / this.g.dpr; }
  yOf(rank) { const b = this.canvas.getBoundingClientRect(); return b.top + this.yDev(rank) / this.g.dpr; }

  // ---- view -----------------------------------------------------------------------------------
  setView(vs, ve) {
    let span = Math.max(MS.TL.MIN_SPAN_NS, ve - vs);
    if (span >= this.span) { vs = 0; span = this.span; }
    vs = Math.min(Math.max(0, vs), this.span - span);
    if (vs === this.vs && vs + span === this.ve) return;
    this.vs = vs;
    this.ve = vs + span;
    this.invalidate();
    for (const f of this.listeners) f(this.vs, this.ve);
  }
  zoomAround(t, factor) { this.setView(t - (t - this.vs) * factor, t + (this.ve - t) * factor); }
  pan(fraction) { const d = (this.ve - this.vs) * fraction; this.setView(this.vs + d, this.ve + d); }
  reset() { this.setRanks(0, this.ranks); this.setView(0, this.span); }

  // The ranks [a, b) in view (whole ranks, at least one, within the run).
  setRanks(a, b) {
    const count = Math.max(1, Math.min(this.ranks, Math.round(b) - Math.round(a)));
    a = Math.min(Math.max(0, Math.round(a)), this.ranks - count);
    if (a === this.r0 && a + count === this.r1) return;
    this.r0 = a;
    this.r1 = a + count;
    this.resize(true);
    this.invalidate();
    for (const f of this.rankListeners) f(this.r0, this.r1);
  }
  // Fewer (factor < 1) or more ranks in view, the rank under the cursor staying where it is; at least
  // one rank fewer or more, so that a few ranks still zoom.
  zoomRanksAround(rank, factor) {
    const count = this.r1 - this.r0;
    const next = factor < 1 ? Math.min(count - 1, Math.round(count * factor)) : Math.max(count + 1, Math.round(count * factor));
    const a = rank - (rank - this.r0) * next / count;
    this.setRanks(a, a + Math.max(1, next));
  }
  panRanks(fraction) {
    const d = Math.round((this.r1 - this.r0) * fraction) || Math.sign(fraction);
    this.setRanks(this.r0 + d, this.r1 + d);
  }

  // Resolves once the view is drawn with every tile it asked for.
  zoomTo(vs, ve) {
    this.setView(vs, ve);
    return this.settled();
  }
  settled() {
    return new Promise((resolve) => { this.waiters.push(resolve); this.invalidate(); });
  }

  view() {
    const f = this.frame || {};
    return { t_start: this.vs, t_end: this.ve, rank_first: this.r0, rank_last: this.r1 - 1,
             mode: f.mode || "bins", states: f.states || 0,
             messages: f.messages || 0, level: f.level, complete: !!f.complete, note: f.note || null };
  }

  invalidate() {
    if (this.pendingFrame) return;
    this.pendingFrame = requestAnimationFrame(() => {
      this.pendingFrame = null;
      try { this.draw(); } catch (e) { MS.fail("the time-line could not be drawn", e); }
    });
  }

  // ---- tiles for a view -----------------------------------------------------------------------
  tileRange(k, vs, ve) {
    const n = Math.pow(2, k), ts = this.span / n;
    return [Math.max(0, Math.floor(vs / ts)), Math.min(n - 1, Math.ceil(ve / ts) - 1)];
  }
  // The bin level whose bins are at most a pixel wide (or the deepest the source holds there),
  // and the best level already at hand: {avail, level, tiles} (tiles null while none is).
  binTiles(wanted) {
    const src = this.source;
    let avail = -1;
    for (let k = wanted; k >= 0; k--) {
      const [i0, i1] = this.tileRange(k, this.vs, this.ve);
      const keys = [];
      for (let i = i0; i <= i1; i++) keys.push(MS.TileSource.key("b", k, i));
      if (!keys.every((key) => src.has(key))) continue;
      if (avail < 0) { avail = k; keys.forEach((key) => src.request(key)); }
      const tiles = keys.map((key) => src.peek(key));
      if (tiles.every(Boolean)) return { avail, level: k, tiles };
    }
    return { avail, level: -1, tiles: null };
  }
  wantedBinLevel() {
    const need = Math.log2(this.g.cols * this.span / ((this.ve - this.vs) * this.pyr.bins));
    return Math.max(0, Math.min(this.pyr.levels, Math.ceil(need - 1e-9)));
  }
  // Event tiles for the view: {tiles} when all are here, {missing: n} while loading,
  // {absent: true} when the report does not hold them.
  eventTiles() {
    const k = this.pyr.event_level, src = this.source;
    if (k === null || k === undefined) return { absent: true };
    const [i0, i1] = this.tileRange(k, this.vs, this.ve);
    if (i1 - i0 + 1 > MS.TL.MAX_EVENT_TILES) return { tooMany: true };
    const keys = [];
    for (let i = i0; i <= i1; i++) keys.push(MS.TileSource.key("e", k, i));
    if (!keys.every((key) => src.has(key))) return { absent: true, heldShare: this.heldShare(k, i0, i1) };
    keys.forEach((key) => src.request(key));
    const tiles = keys.map((key) => src.peek(key));
    if (!tiles.every(Boolean)) return { missing: tiles.filter((t) => !t).length };
    if (tiles.some((t) => t.attrs.truncated)) return { truncated: true };
    return { tiles };
  }

  // The share of the view's time that the embedded event tiles of level k cover (the
  // report embeds the busiest windows only, so a view can straddle their edge).
  heldShare(k, i0, i1) {
    const ts = this.span / Math.pow(2, k);
    let held = 0;
    for (let i = i0; i <= i1; i++) {
      if (this.source.has(MS.TileSource.key("e", k, i))) held += Math.max(0, Math.min(this.ve, (i + 1) * ts) - Math.max(this.vs, i * ts));
    }
    return held / Math.max(this.ve - this.vs, 1e-300);
  }

  // ---- drawing --------------------------------------------------------------------------------
  draw() {
    const t0 = performance.now();
    const g = this.g, L = g.layout, ctx = this.ctx;
    const found = this.binTiles(this.wantedBinLevel()), bins = found.tiles ? found : null;
    const frame = { mode: "bins", states: 0, messages: 0, level: found.level, complete: false };
    let events = null;
    if (bins) {
      const est = MS.paint.sumBins(bins.tiles, this.vs, this.ve, "starts", this.r0, this.r1);
      frame.estimate = est;
      if (est <= MS.TL.MAX_EVENTS) events = this.eventTiles();
    }
    const bg = [MS.rgba32(255, 255, 255), MS.rgba32(246, 248, 251)];
    this.img32.fill(MS.rgba32(255, 255, 255));
    MS.paint.fillBackground(this.img32, L, g.cols, bg, 0, g.cols);
    const over = { borders: [], labels: [], colls: new Map() };
    if (events && events.tiles) {
      frame.mode = "events";
      frame.tiles = events.tiles;
      frame.states = MS.paint.accumulateEvents(this.acc, events.tiles, this.vs, this.ve, L, g.cols,
        this.callFamily, (tile, i, x0, x1, row) => this.collect(over, tile, i, x0, x1, row));
    } else if (bins) {
      const seg = MS.paint.binSegments(bins.tiles, this.vs, this.ve, g.cols);
      MS.paint.accumulateBins(this.acc, bins.tiles, seg, L, g.cols);
      frame.binTiles = bins.tiles;
    }
    if (bins || frame.mode === "events") MS.paint.paintRows(this.img32, this.acc, L, g.cols, bg, frame.mode === "events");
    if (frame.mode === "events") MS.paint.darkenStarts(this.img32, g.cols, L, over.borders);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.putImageData(this.image, g.x0, g.top);
    this.drawGrid();
    if (frame.mode === "events") {
      ctx.save();
      ctx.beginPath();
      ctx.rect(g.x0, g.top, g.cols, L.height);
      ctx.clip();
      this.drawStateDecor(over);
      this.drawCollectives(over);
      frame.messages = this.drawMessages(events.tiles);
      ctx.restore();
    }
    this.drawAxis();
    this.drawRankLabels(frame.mode === "events");
    frame.noDetail = !!(events && events.absent);
    frame.loading = !bins || found.avail !== frame.level || !!(events && events.missing);
    frame.complete = !frame.loading;
    if (frame.noDetail) {
      frame.note = MS.TL.noDetailNote(events.heldShare || 0);
      this.drawNote(frame.note);
    }
    this.frame = frame;
    this.drawOverlay();
    const ms = performance.now() - t0;
    this.redraws.push(ms);
    if (this.firstPaintMs === null && bins) this.firstPaintMs = performance.now();
    this.reportStatus(frame);
    const pending = frame.loading && (this.sourceBusy() || !bins);
    if (!pending) this.waiters.splice(0).forEach((w) => w());
  }

  sourceBusy() { return this.source.pending.size > 0; }

  collect(over, tile, i, x0, x1, row) {
    const ev = tile.tables.events.cols, dpr = this.g.dpr;
    if (x1 - x0 >= 3 * dpr) over.borders.push(x0, row);
    if (x1 - x0 >= 56 * dpr && over.labels.length < 600 * 4) over.labels.push(x0, x1, row, ev.call[i]);
    const c = ev.coll[i];
    if (c >= 0) {
      let e = over.colls.get(c);
      if (!e) over.colls.set(c, (e = { min: row, max: row, rows: [] }));
      e.min = Math.min(e.min, row);
      e.max = Math.max(e.max, row);
      e.rows.push(row, ev.t0[i]);
    }
  }

  drawGrid() {
    const g = this.g, ctx = this.ctx;
    ctx.save();
    ctx.fillStyle = "rgba(20, 30, 50, 0.07)";
    for (const t of this.ticks()) ctx.fillRect(Math.round(this.xDev(t)), g.top, Math.max(1, g.dpr | 0), g.layout.height);
    ctx.restore();
  }

  ticks() {
    const step = this.tickStep(), out = [];
    for (let t = Math.ceil(this.vs / step) * step; t <= this.ve; t += step) out.push(t);
    return out;
  }
  tickStep() {
    const nsPerDev = (this.ve - this.vs) / this.g.cols;
    let step = MS.niceStep(nsPerDev * MS.TL.LABEL_PX * this.g.dpr);
    // Deep in a long run a label is long ("147 421 557.5 µs"): widen the step until the widest fits.
    this.ctx.save();
    this.ctx.font = this.font(11);
    for (let i = 0; i < 6; i++) {
      const w = this.ctx.measureText(MS.fmtTime(this.ve, step)).width + 16 * this.g.dpr;
      if (w <= step / nsPerDev) break;
      step = MS.niceStep(step * 2.2);  // the next of 1, 2, 5 × 10^k
    }
    this.ctx.restore();
    return step;
  }

  reportStatus(frame) {
    for (const f of this.statusListeners || []) f(frame);
  }
};
