// Time-line interaction. One scheme, shown in the help line: wheel zooms at the cursor; a drag
// selects a range and zooms to it; shift-drag or the middle button pans (so do horizontal wheel
// and shift+wheel); + − ← → 0 Home on the keyboard; hover shows details, a click pins them. The
// same over the rank numbers (or alt+wheel) zooms and selects ranks; ↑ ↓ move through them.
"use strict";

Object.assign(MS.Timeline.prototype, {
  attachInput(detail) {
    this.detail = detail;
    const ov = this.overlay;
    ov.addEventListener("pointerdown", (e) => this.onDown(e));
    ov.addEventListener("pointermove", (e) => this.onMove(e));
    ov.addEventListener("pointerup", (e) => this.onUp(e));
    ov.addEventListener("pointerleave", () => { if (!this.drag) this.setHover(null, null); });
    ov.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    ov.addEventListener("dblclick", (e) => this.zoomAround(this.tOfDev(this.devX(e)), 0.5));
    ov.addEventListener("auxclick", (e) => e.preventDefault());
    document.addEventListener("keydown", (e) => this.onKey(e));
  },

  devX(e) { return (e.clientX - this.overlay.getBoundingClientRect().left) * this.g.dpr; },
  devY(e) { return (e.clientY - this.overlay.getBoundingClientRect().top) * this.g.dpr; },

  onDown(e) {
    if (e.button !== 0 && e.button !== 1) return;
    e.preventDefault();
    this.host.focus({ preventScroll: true });
    this.overlay.setPointerCapture(e.pointerId);
    if (e.button === 0 && this.devX(e) < this.g.x0) {
      this.drag = { mode: "ranks", y0: this.devY(e), y1: this.devY(e), moved: false };
      return;
    }
    const pan = e.button === 1 || e.shiftKey;
    this.drag = { mode: pan ? "pan" : "select", x0: this.devX(e), x1: this.devX(e), vs: this.vs, ve: this.ve, moved: false };
    this.overlay.style.cursor = pan ? "grabbing" : "col-resize";
  },

  onMove(e) {
    const x = this.devX(e), y = this.devY(e);
    this.cursorX = x;
    const d = this.drag;
    if (d && d.mode === "ranks") {
      d.y1 = y;
      if (Math.abs(d.y1 - d.y0) > 3 * this.g.dpr) d.moved = true;
      this.drawOverlay();
      return;
    }
    if (d) {
      d.x1 = x;
      if (Math.abs(d.x1 - d.x0) > 3 * this.g.dpr) d.moved = true;
      if (d.mode === "pan") {
        const dt = (d.x0 - x) * (d.ve - d.vs) / this.g.cols;
        this.setView(d.vs + dt, d.ve + dt);
      }
      this.drawOverlay();
      return;
    }
    this.setHover(this.hitTest(x, y), e);
  },

  onUp(e) {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    this.overlay.style.cursor = "";
    if (d.mode === "ranks") {
      const [a, b] = this.ranksBetween(d.y0, d.y1);
      if (d.moved) this.setRanks(a, b);
    } else if (d.mode === "select" && d.moved) {
      const a = this.tOfDev(Math.min(d.x0, d.x1)), b = this.tOfDev(Math.max(d.x0, d.x1));
      this.setView(a, b);
    } else if (!d.moved && e.button === 0) {
      this.select(this.hitTest(this.devX(e), this.devY(e)));
    }
    this.drawOverlay();
  },

  // The ranks of the pixel rows between device heights ya and yb (either order): [first, last + 1).
  ranksBetween(ya, yb) {
    const L = this.g.layout, row = (y) => Math.max(0, Math.min(L.rows - 1, Math.floor((y - this.g.top) / L.rowH)));
    const r0 = row(Math.min(ya, yb)), r1 = row(Math.max(ya, yb));
    return [L.firstRank(r0), L.firstRank(r1) + L.ranksIn(r1)];
  },

  onWheel(e) {
    e.preventDefault();
    const scale = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    if (e.altKey || this.devX(e) < this.g.x0) {
      const dy = (e.deltaY || e.deltaX) * scale;
      const [rank] = this.ranksBetween(this.devY(e), this.devY(e));
      if (dy) this.zoomRanksAround(rank + 0.5, Math.exp(Math.max(-1, Math.min(1, dy * 0.002))));
      return;
    }
    const dx = (e.shiftKey ? e.deltaY : e.deltaX) * scale, dy = e.shiftKey ? 0 : e.deltaY * scale;
    if (Math.abs(dx) > Math.abs(dy)) {
      this.pan(dx / (this.g.cols / this.g.dpr));
    } else if (dy !== 0) {
      this.zoomAround(this.tOfDev(this.devX(e)), Math.exp(Math.max(-1, Math.min(1, dy * 0.002))));
    }
    // Another call or pixel is under the cursor now: hover it once the new view is drawn, rather than
    // keep showing the one from before the zoom until the mouse moves.
    const x = this.devX(e), y = this.devY(e);
    this.settled().then(() => { if (!this.drag) this.setHover(this.hitTest(x, y), e); });
  },

  onKey(e) {
    const t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey || (t && /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName))) return;
    const mid = (this.vs + this.ve) / 2;
    const actions = {
      "+": () => this.zoomAround(mid, 0.5), "=": () => this.zoomAround(mid, 0.5),
      "-": () => this.zoomAround(mid, 2), "_": () => this.zoomAround(mid, 2), "−": () => this.zoomAround(mid, 2),
      ArrowLeft: () => this.pan(-0.2), ArrowRight: () => this.pan(0.2),
      // up and down scroll the page unless the time-line has the focus and shows part of the ranks
      ...(document.activeElement === this.host && this.r1 - this.r0 < this.ranks
        ? { ArrowUp: () => this.panRanks(-0.2), ArrowDown: () => this.panRanks(0.2) } : {}),
      0: () => this.reset(), Home: () => this.reset(), Escape: () => this.select(null),
    };
    const f = actions[e.key];
    if (f) { e.preventDefault(); f(); }
  },

  setHover(item, e) {
    this.hover = item;
    if (!e) this.cursorX = undefined;
    this.drawOverlay();
    this.showTooltip(item, e);
    if (!this.selected && this.detail) this.detail.show(item, false);
  },

  select(item) {
    this.selected = item;
    this.drawOverlay();
    if (this.detail) this.detail.show(item, !!item);
    if (item && item.kind === "event" && item.coll >= 0) {
      this.collective(item).then((c) => {
        if (c && this.selected === item) { this.selected = c; this.drawOverlay(); this.detail.show(c, true); }
      });
    }
  },

  showTooltip(item, e) {
    const tip = this.tooltip;
    if (!item || !e) { tip.hidden = true; return; }
    tip.textContent = MS.detailLine(item, this.data);
    tip.hidden = false;
    const hb = this.host.getBoundingClientRect();
    let x = e.clientX - hb.left + 14, y = e.clientY - hb.top + 16;
    if (x + tip.offsetWidth > hb.width - 4) x = e.clientX - hb.left - tip.offsetWidth - 10;
    if (y + tip.offsetHeight > hb.height) y = e.clientY - hb.top - tip.offsetHeight - 10;
    tip.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
  },

  // ---- hit tests ------------------------------------------------------------------------------
  hitTest(x, y) {
    const g = this.g, f = this.frame;
    if (!f || x < g.x0 || x >= g.x0 + g.cols || y < g.top || y >= g.top + g.layout.height) return null;
    if (f.mode === "events") return this.hitMessage(x, y) || this.hitEvent(x, y);
    return this.hitBin(x, y);
  },

  hitMessage(x, y) {
    const s = this.segs, tol = 5 * this.g.dpr;
    if (!s) return null;
    let best = -1, bestD = tol * tol;
    for (let k = 0; k < s.x0.length; k++) {
      const ax = s.x0[k], ay = s.y0[k], dx = s.x1[k] - ax, dy = s.y1[k] - ay;
      const l2 = dx * dx + dy * dy;
      const u = l2 > 0 ? Math.max(0, Math.min(1, ((x - ax) * dx + (y - ay) * dy) / l2)) : 0;
      const ex = ax + u * dx - x, ey = ay + u * dy - y, d = ex * ex + ey * ey;
      if (d < bestD) { bestD = d; best = k; }
    }
    return best < 0 ? null : this.messageItem(s.tile[best], s.idx[best]);
  },

  hitEvent(x, y) {
    const L = this.g.layout, row = Math.floor((y - this.g.top) / L.rowH);
    if (row < 0 || row >= L.rows) return null;
    const t = this.tOfDev(x), tol = 2 * this.g.dpr * (this.ve - this.vs) / this.g.cols;
    // the lane under the pointer, where the row has one per thread (the gap between lanes: the one above)
    let p = row * L.LM;
    while (L.LM > 1 && p + 1 < row * L.LM + L.lanesIn(row) && y - this.g.top >= L.box(p + 1)[0]) p++;
    let best = null, bestD = Infinity;
    for (let r = L.firstRank(row); r < L.firstRank(row) + L.ranksIn(row); r++) {
      for (const tile of this.frame.tiles) {
        const ev = tile.tables.events.cols, end = tile.rankStart[r + 1];
        for (let i = MS.paint.firstEventAt(tile, r, t - tol); i < end && ev.t0[i] <= t + tol; i++) {
          if (L.LM > 1 && L.paintRow(r, ev.thread[i]) !== p) continue;
          const t1 = Number.isNaN(ev.t1[i]) ? this.span : ev.t1[i];
          const d = t < ev.t0[i] ? ev.t0[i] - t : t > t1 ? t - t1 : 0;
          if (d <= tol && d < bestD) { bestD = d; best = [tile, i]; }
        }
      }
    }
    return best ? this.eventItem(best[0], best[1]) : null;
  },

  hitBin(x, y) {
    const g = this.g, L = g.layout, f = this.frame, row = Math.floor((y - g.top) / L.rowH);
    const col = Math.floor(x - g.x0), n = L.ranksIn(row), o = (row * g.cols + col) * MS.paint.NF;
    const shares = Array.from({ length: MS.paint.NF }, (_, k) => this.acc[o + k] / (255 * n));
    const t0 = this.tOfDev(g.x0 + col), t1 = this.tOfDev(g.x0 + col + 1);
    const item = { kind: "bin", rank: L.firstRank(row), ranks: n, t0: Infinity, t1: -Infinity, shares,
                   bytes: 0, msgs: 0, starts: 0 };
    // The bins whose centre is in the pixel: each bin counts at one pixel only (every bin touching it
    // counted a bin about a pixel wide twice: 130 calls started where 64 did); a pixel narrower than
    // the bins at hand takes the bin under it. The panel's from/to are the bins' span, which the
    // counts are exact for.
    for (const centred of [true, false]) {
      for (const tile of f.binTiles || []) {
        const a = tile.attrs, bw = (a.t_end - a.t_start) / a.bins, c = tile.tables.bins.cols;
        const at = (t) => (t - a.t_start) / bw;
        const b0 = Math.max(0, centred ? Math.ceil(at(t0) - 0.5) : Math.floor(at(t0)));
        const b1 = Math.min(a.bins, centred ? Math.ceil(at(t1) - 0.5) : Math.floor(at(t0)) + 1);
        if (b1 <= b0) continue;
        item.t0 = Math.min(item.t0, a.t_start + b0 * bw);
        item.t1 = Math.max(item.t1, a.t_start + b1 * bw);
        for (let r = item.rank; r < item.rank + n; r++) {
          for (let b = b0; b < b1; b++) {
            const i = r * a.bins + b;
            item.bytes += c.bytes[i]; item.msgs += c.msgs[i]; item.starts += c.starts[i];
          }
        }
      }
      if (item.t1 > item.t0) break;
    }
    if (!(item.t1 > item.t0)) { item.t0 = t0; item.t1 = t1; }
    return item;
  },

  messageItem(tile, j) {
    const c = tile.tables.messages.cols, cs = this.data.callsites;
    return { kind: "message", src: c.src[j], dst: c.dst[j], ts: c.ts[j], tsl: c.tsl[j], tr: c.tr[j], trl: c.trl[j],
             bytes: c.bytes[j], tag: c.tag[j], comm: c.comm[j], send_event: c.send_event[j], recv_event: c.recv_event[j],
             send_callsite: cs[c.send_callsite[j]] || "", recv_callsite: cs[c.recv_callsite[j]] || "" };
  },

  eventItem(tile, i) {
    const c = tile.tables.events.cols, call = c.call[i];
    return { kind: "event", rank: c.rank[i], thread: c.thread[i], call: this.data.calls[call] || `call ${call}`,
             family: this.callFamily[call] ?? 4, t0: c.t0[i], t1: c.t1[i], bytes: c.bytes[i], peer: c.peer[i],
             tag: c.tag[i], comm: c.comm[i], root: c.root[i], callsite: this.data.callsites[c.callsite[i]] || "",
             event: c.event[i], coll: c.coll[i], polls: c.polls ? c.polls[i] : 1, inside: c.inside ? c.inside[i] : NaN };
  },

  // Every rank's part of the collective instance of `item`: the event tiles over the instance's
  // time range (loaded if needed), their calls with the same coll id.
  async collective(item) {
    let rec = null;
    for (const tile of (this.frame && this.frame.tiles) || []) {
      const c = tile.tables.colls;
      if (!c) continue;
      for (let j = 0; j < c.rows && !rec; j++) if (c.cols.coll[j] === item.coll) rec = [tile, j];
      if (rec) break;
    }
    if (!rec) return null;
    const c = rec[0].tables.colls.cols, j = rec[1];
    const info = { kind: "collective", coll: item.coll, call: this.data.calls[c.call[j]] || item.call, comm: c.comm[j],
                   root: c.root[j], first_enter: c.first_enter[j], last_enter: c.last_enter[j],
                   first_leave: c.first_leave[j], last_leave: c.last_leave[j], ranks: c.ranks[j], members: [] };
    const k = this.pyr.event_level, [i0, i1] = this.tileRange(k, info.first_enter, info.last_leave);
    if (i1 - i0 + 1 > MS.TL.MAX_EVENT_TILES) return null;
    const keys = [];
    for (let i = i0; i <= i1; i++) keys.push(MS.TileSource.key("e", k, i));
    const tiles = await Promise.all(keys.filter((key) => this.source.has(key)).map((key) => this.source.get(key)));
    const seen = new Set();
    for (const tile of tiles) {
      const ev = tile.tables.events.cols;
      for (let i = 0; i < tile.tables.events.rows; i++) {
        if (ev.coll[i] !== item.coll || seen.has(ev.event[i])) continue;
        seen.add(ev.event[i]);
        info.members.push(this.eventItem(tile, i));
      }
    }
    info.members.sort((a, b) => a.rank - b.rank || a.t0 - b.t0);
    return info;
  },
});
