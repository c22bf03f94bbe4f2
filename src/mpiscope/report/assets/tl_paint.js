// Time-line rasterisation: pure functions over typed arrays, no DOM.
// Both levels of detail end in the same per-pixel-column accumulator (acc: for every pixel row
// and column, the share of each family on a 0..255 scale), painted by paintRows(). Zoomed out the
// accumulator is filled from the bin pyramid (work ~ visible bins x ranks), zoomed in from single
// events (work ~ visible events + columns). Per-frame work is thus bounded by the pixels and the
// few tens of thousands of events we allow, never by the trace.
"use strict";

MS.paint = {};
const NF = MS.FAMILY_COLORS.length; // families
// accumulateBins and paintRows are unrolled over the families, for speed: a family added without
// unrolling them for it would be drawn as nothing, so the page refuses to start
if (NF !== 6) throw new Error(`tl_paint.js is unrolled for 6 families, not ${NF}`);
MS.paint.NF = NF;

// Column segments of the bins of tile(s) over the view: for each visible bin, the pixel columns
// it overlaps and by how much (in column widths). Computed once per frame, shared by all ranks.
MS.paint.binSegments = function (tiles, vs, ve, cols) {
  const segTile = [], segBin = [], segCol = [], segW = [];
  const pxPerNs = cols / (ve - vs);
  for (let ti = 0; ti < tiles.length; ti++) {
    const a = tiles[ti].attrs;
    const nb = a.bins, bw = (a.t_end - a.t_start) / nb;
    const b0 = Math.max(0, Math.floor((vs - a.t_start) / bw));
    const b1 = Math.min(nb, Math.ceil((ve - a.t_start) / bw));
    for (let b = b0; b < b1; b++) {
      const x0 = (a.t_start + b * bw - vs) * pxPerNs, x1 = (a.t_start + (b + 1) * bw - vs) * pxPerNs;
      const c0 = Math.max(0, Math.floor(x0)), c1 = Math.min(cols, Math.ceil(x1));
      for (let c = c0; c < c1; c++) {
        const w = Math.min(x1, c + 1) - Math.max(x0, c);
        if (w <= 0) continue;
        segTile.push(ti); segBin.push(b); segCol.push(c); segW.push(w);
      }
    }
  }
  return { n: segCol.length, tile: Uint16Array.from(segTile), bin: Uint32Array.from(segBin),
           col: Uint32Array.from(segCol), w: Float32Array.from(segW) };
};

// acc[(row*cols + col)*NF + f] += share of family f, for the ranks of each pixel row.
MS.paint.accumulateBins = function (acc, tiles, seg, layout, cols) {
  acc.fill(0);
  const shares = tiles.map((t) => Array.from({ length: NF }, (_, f) => t.tables.bins.cols[`share${f}`]));
  const nbs = tiles.map((t) => t.attrs.bins);
  for (let r = layout.first; r < layout.first + layout.ranks; r++) {
    const base = layout.rowOf(r) * cols * NF;
    for (let s = 0; s < seg.n; s++) {
      const ti = seg.tile[s], sh = shares[ti], i = r * nbs[ti] + seg.bin[s], w = seg.w[s];
      const o = base + seg.col[s] * NF;
      acc[o] += sh[0][i] * w; acc[o + 1] += sh[1][i] * w; acc[o + 2] += sh[2][i] * w;
      acc[o + 3] += sh[3][i] * w; acc[o + 4] += sh[4][i] * w; acc[o + 5] += sh[5][i] * w;
    }
  }
};

// Sum of a bin column over the view for ranks [r0, r1) (e.g. `starts`: how many events start there).
MS.paint.sumBins = function (tiles, vs, ve, column, r0, r1) {
  let sum = 0;
  for (const t of tiles) {
    const a = t.attrs, nb = a.bins, bw = (a.t_end - a.t_start) / nb;
    const b0 = Math.max(0, Math.floor((vs - a.t_start) / bw)), b1 = Math.min(nb, Math.ceil((ve - a.t_start) / bw));
    const col = t.tables.bins.cols[column];
    for (let r = r0; r < Math.min(r1, a.ranks); r++) for (let b = b0; b < b1; b++) sum += col[r * nb + b];
  }
  return sum;
};

// First row of rank `r` in an event tile whose call may still be running at time `t`: rows are in
// entry order, and `reach` (made once per tile) is the latest exit of the rank's rows up to each row,
// so every row before the one found ended before `t`. A thread's long call may lie far back among
// another thread's rows (an MPI_Recv of 1.1 s under 8 rows of the other thread's calls was not drawn).
MS.paint.firstEventAt = function (tile, r, t) {
  const reach = MS.paint.reach(tile);
  let lo = tile.rankStart[r], hi = tile.rankStart[r + 1];
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (reach[mid] < t) lo = mid + 1; else hi = mid;
  }
  return lo;
};

MS.paint.reach = function (tile) {
  if (tile.reach) return tile.reach;
  const ev = tile.tables.events.cols, n = tile.tables.events.rows, reach = new Float64Array(n);
  for (let r = 0; r + 1 < tile.rankStart.length; r++) {
    let most = -Infinity;
    for (let i = tile.rankStart[r]; i < tile.rankStart[r + 1]; i++) {
      const t1 = Number.isNaN(ev.t1[i]) ? Infinity : ev.t1[i];  // never returned: runs to the end
      reach[i] = most = Math.max(most, t1, ev.t0[i]);
    }
  }
  tile.reach = reach;
  return reach;
};

// Events of the view into acc (each tile clipped to its own window so that calls shown by two
// tiles count once), each on its thread's paint row (layout.paintRow); calls
// `visit(tile, row, x0, x1, paintRow)` for each visible call.
MS.paint.accumulateEvents = function (acc, tiles, vs, ve, layout, cols, callFamily, visit) {
  acc.fill(0);
  const pxPerNs = cols / (ve - vs);
  let states = 0;
  for (const tile of tiles) {
    const ev = tile.tables.events.cols;
    const lo = Math.max(vs, tile.attrs.t_start), hi = Math.min(ve, tile.attrs.t_end);
    if (hi <= lo) continue;
    for (let r = layout.first; r < layout.first + layout.ranks; r++) {
      let row = layout.rowOf(r), base = row * cols * NF;
      const end = tile.rankStart[r + 1];
      for (let i = MS.paint.firstEventAt(tile, r, lo); i < end; i++) {
        const t0 = ev.t0[i];
        if (t0 >= hi) break;
        if (layout.LM > 1) { row = layout.paintRow(r, ev.thread[i]); base = row * cols * NF; }
        let t1 = ev.t1[i];
        if (Number.isNaN(t1)) t1 = tile.attrs.t_end;         // never returned: runs to the end
        if (t1 <= lo) continue;
        const first = tile === tiles[0] || Math.max(t0, vs) >= tile.attrs.t_start;   // once, if in two tiles
        if (first) states++;
        const x0 = (Math.max(t0, lo) - vs) * pxPerNs, x1 = (Math.min(t1, hi) - vs) * pxPerNs;
        const f = callFamily[ev.call[i]] ?? 4;
        const c0 = Math.floor(x0), c1 = Math.min(cols - 1, Math.ceil(x1) - 1);
        if (c0 === c1 || c1 < c0) {
          acc[base + c0 * NF + f] += 255 * (x1 - x0);
        } else {
          acc[base + c0 * NF + f] += 255 * (c0 + 1 - x0);
          for (let c = c0 + 1; c < c1; c++) acc[base + c * NF + f] += 255;
          acc[base + c1 * NF + f] += 255 * (x1 - c1);
        }
        // its border and label once, over the whole call in view (not once per tile it spans: a long
        // MPI_Init showed its label twice and a border where two tiles met)
        if (visit && first) {
          const end = Number.isNaN(ev.t1[i]) ? ve : Math.min(ev.t1[i], ve);
          visit(tile, i, (Math.max(t0, vs) - vs) * pxPerNs, (end - vs) * pxPerNs, row);
        }
      }
    }
  }
  return states;
};

// Paint acc into a Uint32Array image (width `cols`) over the rows' background. Rows tall enough
// stack the families from the bottom (the height of a colour = its share of the column); thin rows
// blend them into one colour over the background, so a 1-pixel row still shows where and how much
// MPI ran. Single calls (`events`) always blend, with a floor so that a call narrower than a pixel
// still shows: their columns are covered by one call or are its edge, where blending is the
// anti-aliasing of that edge. A blended row is computed once as a line and copied to its pixel
// rows (contiguous copies, not strided writes).
MS.paint.paintRows = function (img, acc, layout, cols, bgColors, events) {
  const fr = Float32Array.from(MS.FAMILY_RGB.flat()), fam32 = MS.FAMILY_RGB.map(([r, g, b]) => MS.rgba32(r, g, b));
  const h = layout.rowH, gap = h >= 5 ? 1 : 0, hh = h - gap, stack = hh >= 14 && !events, floor = events ? 0.45 : 0;
  const line = new Uint32Array(cols), LM = events ? layout.LM : 1, lane = MS.rgba32(226, 230, 236);
  for (let p = 0; p < layout.rows * LM; p++) {
    // single calls: a row of paint rows (the lanes of its rank's threads), each over its own pixels
    const row = Math.floor(p / LM);
    if (p - row * LM >= (LM > 1 ? layout.lanesIn(row) : 1)) continue;
    const [y0, y1] = LM > 1 ? layout.box(p) : [row * h, row * h + hh];
    if (LM > 1 && y1 < row * h + hh && p - row * LM < layout.lanesIn(row) - 1) img.fill(lane, y1 * cols, (y1 + 1) * cols);
    const div = layout.ranksIn(row) * 255, abase = p * cols * NF;
    const bg = bgColors[row & 1], bgr = bg & 255, bgg = (bg >> 8) & 255, bgb = (bg >> 16) & 255;
    if (stack) {
      for (let y = y0; y < y0 + hh; y++) img.fill(bg, y * cols, (y + 1) * cols);
      for (let x = 0; x < cols; x++) {
        const o = abase + x * NF;
        let cum = 0, prev = y0 + hh;
        for (let f = 0; f < NF; f++) {
          const s = acc[o + f];
          if (s <= 0) continue;
          cum += s / div;
          const top = y0 + hh - Math.round(Math.min(1, cum) * hh), c = fam32[f];
          for (let y = top; y < prev; y++) img[y * cols + x] = c;
          prev = top;
        }
      }
      continue;
    }
    for (let x = 0, o = abase; x < cols; x++, o += NF) {
      // unrolled over the six families (the inner loop of every frame)
      const s0 = acc[o], s1 = acc[o + 1], s2 = acc[o + 2], s3 = acc[o + 3], s4 = acc[o + 4], s5 = acc[o + 5];
      const tot = s0 + s1 + s2 + s3 + s4 + s5;
      if (tot <= 0) { line[x] = bg; continue; }
      const k = Math.max(floor, Math.min(1, tot / div)), w = k / tot, inv = 1 - k;
      const r = (fr[0] * s0 + fr[3] * s1 + fr[6] * s2 + fr[9] * s3 + fr[12] * s4 + fr[15] * s5) * w + bgr * inv;
      const g = (fr[1] * s0 + fr[4] * s1 + fr[7] * s2 + fr[10] * s3 + fr[13] * s4 + fr[16] * s5) * w + bgg * inv;
      const b = (fr[2] * s0 + fr[5] * s1 + fr[8] * s2 + fr[11] * s3 + fr[14] * s4 + fr[17] * s5) * w + bgb * inv;
      line[x] = (0xff000000 | ((b + 0.5) << 16) | ((g + 0.5) << 8) | (r + 0.5)) >>> 0;
    }
    for (let y = y0; y < y1; y++) img.set(line, y * cols);
  }
};

// Call borders: the first pixel column of each call wide enough to show one, darkened in place
// (one pass over the pixels, instead of a fillRect per call).
MS.paint.darkenStarts = function (img, cols, layout, starts) {
  for (let k = 0; k < starts.length; k += 2) {
    const x = Math.floor(starts[k]), [y0, y1] = layout.box(starts[k + 1]);
    if (x < 0 || x >= cols || y1 - y0 < 4) continue;
    for (let y = y0, i = y0 * cols + x; y < y1; y++, i += cols) {
      const c = img[i];     // 72 % of each channel: c - c/4 - c/32 per byte, without carries across bytes
      img[i] = (0xff000000 | (c - ((c >>> 2) & 0x3f3f3f) - ((c >>> 5) & 0x070707))) >>> 0;
    }
  }
};

MS.paint.fillBackground = function (img, layout, cols, bgColors, x0, x1) {
  const h = layout.rowH, gap = h >= 5 ? 1 : 0;
  for (let row = 0; row < layout.rows; row++) {
    const c = bgColors[row & 1];
    for (let y = row * h; y < row * h + h - gap; y++) img.fill(c, y * cols + x0, y * cols + x1);
  }
};
