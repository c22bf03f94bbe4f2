// Time-line: what is drawn over the painted rows (axis, rank labels, call borders and names,
// collectives, messages) and on the overlay canvas (hover, selection, drag band), so that moving
// the mouse never repaints the rows.
"use strict";

MS.FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

Object.assign(MS.Timeline.prototype, {
  font(px, weight) { return `${weight || 400} ${Math.round(px * this.g.dpr)}px ${MS.FONT}`; },

  drawAxis() {
    const g = this.g, ctx = this.ctx, dpr = g.dpr;
    ctx.save();
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, this.canvas.width, g.top);
    ctx.fillStyle = "#d5dae1";
    ctx.fillRect(g.x0, g.top - dpr, g.cols, dpr);
    const step = this.tickStep();
    ctx.font = this.font(11);
    ctx.textBaseline = "top";
    ctx.fillStyle = "#4b5563";
    let right = -Infinity;
    for (const t of this.ticks()) {
      const x = Math.round(this.xDev(t));
      ctx.fillRect(x, g.top - 6 * dpr, dpr, 6 * dpr);
      const label = MS.fmtTime(t, step);
      const w = ctx.measureText(label).width;
      const lx = Math.min(Math.max(x - w / 2, g.x0 - 4 * dpr), g.x0 + g.cols - w);
      if (lx < right + 6 * dpr) continue;  // pushed inside at an edge onto its neighbour: tick only
      ctx.fillText(label, lx, 6 * dpr);
      right = lx + w;
    }
    ctx.fillStyle = "#9aa3af";
    ctx.font = this.font(10, 600);
    ctx.fillText("RANK", 8 * dpr, 8 * dpr);
    this.drawDetailWindows();
    ctx.restore();
  },

  // Where a report holds single calls (it may not hold them everywhere): a green strip under the axis.
  drawDetailWindows() {
    const d = this.data.detail;
    if (!d || d.complete || !d.windows) return;
    const g = this.g, ctx = this.ctx;
    ctx.fillStyle = "#16a34a";
    for (const [a, b] of d.windows) {
      if (b < this.vs || a > this.ve) continue;
      const x0 = Math.max(g.x0, this.xDev(a)), x1 = Math.min(g.x0 + g.cols, this.xDev(b));
      ctx.fillRect(x0, g.top - 4 * g.dpr, Math.max(g.dpr, x1 - x0), 3 * g.dpr);
    }
  },

  drawRankLabels(lanes) {
    const g = this.g, L = g.layout, ctx = this.ctx, dpr = g.dpr;
    ctx.save();
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, g.top, g.x0 - 2 * dpr, L.height);
    ctx.font = this.font(11);
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    ctx.fillStyle = "#374151";
    const minPx = 14 * dpr;
    let every = 1;
    for (const k of [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 512, 1000]) {
      every = k;
      if (k * L.rowH >= minPx) break;
    }
    // the lanes of a rank's threads, named where they are tall enough (the last lane holds the
    // threads beyond it: "t3+"), the rank's number left of them
    const named = lanes && L.LM > 1 && L.rowH / L.LM >= 11 * dpr, threads = this.data.threads || [];
    for (let row = 0; row < L.rows; row += every) {
      const r = L.firstRank(row), n = L.ranksIn(row), lanes = named ? L.lanesIn(row) : 1;
      const label = n > 1 && every === 1 ? `${r}–${r + n - 1}` : String(r);
      ctx.fillText(label, g.x0 - (lanes > 1 ? 26 : 8) * dpr, g.top + (row + 0.5) * L.rowH);
      if (lanes === 1) continue;
      ctx.save();
      ctx.font = this.font(9);
      ctx.fillStyle = "#9aa3af";
      for (let k = 0; k < lanes; k++) {
        const [y0, y1] = L.box(row * L.LM + k);
        ctx.fillText(`t${k}${k === lanes - 1 && threads[r] > lanes ? "+" : ""}`, g.x0 - 5 * dpr, g.top + (y0 + y1) / 2);
      }
      ctx.restore();
    }
    ctx.restore();
  },

  drawStateDecor(over) {
    const g = this.g, L = g.layout, ctx = this.ctx, dpr = g.dpr;
    ctx.save();
    ctx.font = this.font(11, 500);
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#ffffff";
    const lab = over.labels;
    for (let k = 0; k < lab.length; k += 4) {
      const [y0, y1] = L.box(lab[k + 2]);
      if (y1 - y0 < 13 * dpr) continue;
      const x0 = Math.max(0, lab[k]), x1 = Math.min(g.cols, lab[k + 1]), name = MS.shortCall(this.data.calls[lab[k + 3]]);
      if (ctx.measureText(name).width > x1 - x0 - 8 * dpr) continue;
      ctx.fillText(name, g.x0 + x0 + 4 * dpr, g.top + (y0 + y1) / 2 - 0.5 * dpr);
    }
    ctx.restore();
  },

  // A collective instance: one line across its ranks at the moment the last of them entered,
  // a dot on each rank's row.
  drawCollectives(over) {
    const g = this.g, L = g.layout, ctx = this.ctx, dpr = g.dpr;
    ctx.save();
    ctx.strokeStyle = "rgba(120, 40, 0, 0.75)";
    ctx.fillStyle = "rgba(120, 40, 0, 0.85)";
    ctx.lineWidth = 1.5 * dpr;
    ctx.beginPath();
    const dots = [];
    for (const c of over.colls.values()) {
      if (c.max === c.min) continue;
      let t = -Infinity;
      for (let k = 1; k < c.rows.length; k += 2) t = Math.max(t, c.rows[k]);
      if (t < this.vs || t > this.ve) continue;
      const x = this.xDev(t);
      ctx.moveTo(x, g.top + L.box(c.min)[0] + 1);
      ctx.lineTo(x, g.top + L.box(c.max)[1] - 1);
      for (let k = 0; k < c.rows.length; k += 2) {
        const [y0, y1] = L.box(c.rows[k]);
        dots.push(x, g.top + (y0 + y1) / 2);
      }
    }
    ctx.stroke();
    if (L.rowH / L.LM >= 6 * dpr && over.colls.size <= 40) {
      ctx.beginPath();
      const rad = Math.min(3 * dpr, L.rowH / L.LM / 4);
      for (let k = 0; k < dots.length; k += 2) { ctx.moveTo(dots[k] + rad, dots[k + 1]); ctx.arc(dots[k], dots[k + 1], rad, 0, 6.2832); }
      ctx.fill();
    }
    ctx.restore();
  },

  // Messages: a line from the send (entered) to the receive (completed), S-CAT's view; kept for
  // hit tests. A message in two tiles is drawn from one of them only.
  drawMessages(tiles) {
    const g = this.g, ctx = this.ctx, dpr = g.dpr, L = g.layout;
    const lo = tiles[0].attrs.t_start, hi = tiles[tiles.length - 1].attrs.t_end;
    const segs = { x0: [], y0: [], x1: [], y1: [], tile: [], idx: [] };
    ctx.save();
    ctx.beginPath();
    let n = 0;
    outer: for (const tile of tiles) {
      const m = tile.tables.messages;
      if (!m) continue;
      const c = m.cols, a = tile.attrs, last = tile === tiles[tiles.length - 1];
      for (let j = 0; j < m.rows; j++) {
        const ts = c.ts[j], tr = c.trl[j];
        if (!(ts < this.ve && tr > this.vs) || !(L.shows(c.src[j]) || L.shows(c.dst[j]))) continue;
        const own = Math.min(Math.max(ts, lo), hi);
        if (own < a.t_start || (own >= a.t_end && !(last && own === hi))) continue;
        if (n >= MS.TL.MAX_MESSAGES) break outer;
        const s = this.clipSegment(this.xDev(ts), this.yDev(c.src[j]), this.xDev(tr), this.yDev(c.dst[j]));
        ctx.moveTo(s[0], s[1]);
        ctx.lineTo(s[2], s[3]);
        segs.x0.push(s[0]); segs.y0.push(s[1]); segs.x1.push(s[2]); segs.y1.push(s[3]);
        segs.tile.push(tile); segs.idx.push(j);
        n++;
      }
    }
    ctx.strokeStyle = "rgba(17, 24, 39, 0.62)";
    ctx.lineWidth = dpr;
    ctx.stroke();
    this.drawArrowHeads(segs, "rgba(17, 24, 39, 0.7)");
    ctx.restore();
    this.segs = segs;
    return n;
  },

  // Keep far-away ends within a range the rasteriser handles, moving them along the line.
  clipSegment(x0, y0, x1, y1) {
    const lim = 1e5;
    const clip = (xa, ya, xb, yb) => {
      if (xa >= -lim && xa <= lim) return [xa, ya];
      const xc = xa < -lim ? -lim : lim, f = (xc - xb) / (xa - xb);
      return [xc, yb + (ya - yb) * f];
    };
    const [a, b] = clip(x0, y0, x1, y1), [c, d] = clip(x1, y1, x0, y0);
    return [a, b, c, d];
  },

  drawArrowHeads(segs, color, ctx) {
    ctx = ctx || this.ctx;
    const dpr = this.g.dpr, len = 6 * dpr;
    if (segs.x0.length > 1500) return;
    ctx.fillStyle = color;
    ctx.beginPath();
    for (let k = 0; k < segs.x0.length; k++) {
      const dx = segs.x1[k] - segs.x0[k], dy = segs.y1[k] - segs.y0[k], l = Math.hypot(dx, dy);
      if (l < 3 * len) continue;
      const ux = dx / l, uy = dy / l, x = segs.x1[k], y = segs.y1[k];
      ctx.moveTo(x, y);
      ctx.lineTo(x - ux * len - uy * len * 0.45, y - uy * len + ux * len * 0.45);
      ctx.lineTo(x - ux * len + uy * len * 0.45, y - uy * len - ux * len * 0.45);
      ctx.closePath();
    }
    ctx.fill();
  },

  drawNote(text) {
    const g = this.g, ctx = this.ctx, dpr = g.dpr;
    ctx.save();
    ctx.font = this.font(12, 500);
    const w = ctx.measureText(text).width + 24 * dpr, h = 26 * dpr;
    const x = g.x0 + (g.cols - w) / 2, y = g.top + Math.min(g.layout.height - h, 12 * dpr);
    ctx.fillStyle = "rgba(255, 251, 235, 0.95)";
    ctx.strokeStyle = "#d97706";
    ctx.lineWidth = dpr;
    ctx.fillRect(x, y, w, h);
    ctx.strokeRect(x, y, w, h);
    ctx.fillStyle = "#78350f";
    ctx.textBaseline = "middle";
    ctx.fillText(text, x + 12 * dpr, y + h / 2);
    ctx.restore();
  },

  // ---- overlay: hover and selection highlights, the drag band, the cursor's time -----------
  drawOverlay() {
    const g = this.g, o = this.octx, dpr = g.dpr;
    o.clearRect(0, 0, this.overlay.width, this.overlay.height);
    for (const [item, strong] of [[this.selected, true], [this.hover, false]]) {
      if (item) this.highlight(item, strong);
    }
    if (this.drag && this.drag.mode === "ranks") {
      const [a, b] = this.ranksBetween(this.drag.y0, this.drag.y1), L = g.layout;
      const y0 = g.top + L.rowOf(a) * L.rowH, y1 = g.top + (L.rowOf(b - 1) + 1) * L.rowH;
      o.fillStyle = "rgba(37, 99, 235, 0.12)";
      o.fillRect(0, y0, g.x0 + g.cols, y1 - y0);
      o.fillStyle = "rgba(37, 99, 235, 0.8)";
      o.fillRect(0, y0, g.x0 + g.cols, dpr);
      o.fillRect(0, y1 - dpr, g.x0 + g.cols, dpr);
      o.font = this.font(11, 600);
      o.textBaseline = "bottom";
      o.fillText(b - a > 1 ? `ranks ${a}–${b - 1}` : `rank ${a}`, g.x0 + 4 * dpr, Math.max(y0 - 2 * dpr, 12 * dpr));
    } else if (this.drag && this.drag.mode === "select") {
      const a = Math.min(this.drag.x0, this.drag.x1), b = Math.max(this.drag.x0, this.drag.x1);
      o.fillStyle = "rgba(37, 99, 235, 0.12)";
      o.fillRect(a, g.top, b - a, g.layout.height);
      o.fillStyle = "rgba(37, 99, 235, 0.8)";
      o.fillRect(a, g.top, dpr, g.layout.height);
      o.fillRect(b, g.top, dpr, g.layout.height);
      o.font = this.font(11, 600);
      o.textBaseline = "bottom";
      o.fillText(MS.fmtDur(this.tOfDev(b) - this.tOfDev(a)), a + 4 * dpr, g.top - 2 * dpr);
    } else if (this.cursorX !== undefined && this.cursorX >= g.x0) {
      o.fillStyle = "rgba(17, 24, 39, 0.35)";
      o.fillRect(Math.round(this.cursorX), g.top, dpr, g.layout.height);
    }
  },

  highlight(item, strong) {
    const g = this.g, L = g.layout, o = this.octx, dpr = g.dpr;
    const hh = L.rowH - (L.rowH >= 5 ? 1 : 0);
    o.save();
    if (item.kind === "message") {
      // within the plot, as the other messages are: not over the rank labels or past the right edge
      o.beginPath();
      o.rect(g.x0, g.top, g.cols, L.height);
      o.clip();
      // a white halo under the line keeps it readable over any family's colour
      const s = this.clipSegment(this.xDev(item.ts), this.yDev(item.src), this.xDev(item.trl), this.yDev(item.dst));
      o.lineCap = "round";
      for (const [color, width] of [["rgba(255, 255, 255, 0.95)", 5], [strong ? "#dc2626" : "#1d4ed8", 2.5]]) {
        o.strokeStyle = color;
        o.lineWidth = width * dpr;
        o.beginPath();
        o.moveTo(s[0], s[1]);
        o.lineTo(s[2], s[3]);
        o.stroke();
      }
      this.drawArrowHeads({ x0: [s[0]], y0: [s[1]], x1: [s[2]], y1: [s[3]] }, strong ? "#dc2626" : "#1d4ed8", o);
    } else if (item.kind === "event" || item.kind === "collective") {
      const rects = item.kind === "collective" ? item.members : [item];
      o.strokeStyle = strong ? "#dc2626" : "#1d4ed8";
      o.lineWidth = 2 * dpr;
      for (const e of rects) {
        if (!L.shows(e.rank)) continue;
        const x0 = this.xDev(e.t0), x1 = this.xDev(Number.isNaN(e.t1) ? this.span : e.t1);
        const [y0, y1] = L.box(L.paintRow(e.rank, e.thread || 0));
        o.strokeRect(Math.max(g.x0 - 2 * dpr, x0), g.top + y0 + dpr, Math.max(2 * dpr, Math.min(x1, g.x0 + g.cols + 2 * dpr) - Math.max(g.x0 - 2 * dpr, x0)), Math.max(2 * dpr, y1 - y0 - 2 * dpr));
      }
    } else if (item.kind === "bin" && L.shows(item.rank)) {
      o.strokeStyle = "#111827";
      o.lineWidth = dpr;
      const y = g.top + L.rowOf(item.rank) * L.rowH;
      o.strokeRect(this.xDev(item.t0), y + 0.5 * dpr, Math.max(dpr, this.xDev(item.t1) - this.xDev(item.t0)), Math.max(dpr, hh - dpr));
    }
    o.restore();
  },
});
