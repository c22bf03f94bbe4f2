"use strict";
// The adaptive broadcast (SPEC §5): what each broadcast cost, with the optimiser's swaps and
// undos marked where the new tree took over, and the list of them.

MS.renderBcast = function (data) {
  const b = data.bcast, host = document.getElementById("bcast");
  document.getElementById("sec-bcast").hidden = false;
  document.querySelector('#nav a[href="#sec-bcast"]').hidden = false;
  const swaps = (b.swaps || []).filter((s) => s.comm === b.comm);
  const undos = swaps.filter((s) => s.op === "undo").length;
  const s = b.series || { bcast: [], mean_ns: [], max_ns: [] };
  host.append(MS.el("p", {}, b.mode === "adaptive"
    ? `MPI_Bcast ran on mpiscope's adaptive tree: ${MS.fmtCount(swaps.length - undos)} swap${swaps.length - undos === 1 ? "" : "s"} and ${MS.fmtCount(undos)} undo${undos === 1 ? "" : "s"} over ${MS.fmtCount(b.broadcasts)} broadcasts on communicator ${b.comm}.`
    : `MPI_Bcast ran on mpiscope's binomial tree, without adaptation (${MS.fmtCount(b.broadcasts)} broadcasts on communicator ${b.comm}).`));
  if (s.bcast.length) {
    const tenth = Math.max(1, Math.ceil(s.bcast.length / 10));
    const mean = (xs) => xs.reduce((a, x) => a + x, 0) / xs.length;
    host.append(MS.el("p", { class: "muted" },
      `Mean per-process time: ${MS.fmtDur(mean(s.mean_ns.slice(0, tenth)))} over the first tenth of the broadcasts, ` +
      `${MS.fmtDur(mean(s.mean_ns.slice(-tenth)))} over the last.`));
    const chart = MS.el("div", {});
    host.append(chart);
    MS.charts.bcastSeries(chart, s, swaps);
  }
  const p = b.params || {};
  host.append(MS.el("p", { class: "muted" }, "Parameters: " + Object.entries(p).map(([k, v]) => `${k} ${v}`).join(", ") + "."));
  if (swaps.length) {
    const rows = swaps.map((x) => ({ bcast: x.bcast, op: x.op, rank_a: x.rank_a, rank_b: x.rank_b, interval: x.interval,
                                     total_wait_ns: x.total_wait_ns }));
    const t = MS.el("div", { class: "table-wrap" });
    host.append(MS.el("h3", {}, "Swaps and undos"), t);
    MS.charts.table(t, MS.columnsFor(rows, { bcast: "from broadcast", op: "operation", rank_a: "rank", rank_b: "with rank",
      interval: "next interval", total_wait_ns: "total wait before" }, ["bcast", "op", "rank_a", "rank_b", "interval", "total_wait_ns"]), rows);
  }
};

// Per broadcast, the mean (line) and the largest (light line) per-process time on a log scale;
// a swap is a solid mark where its tree took over, an undo a dashed one.
MS.charts.bcastSeries = function (host, s, swaps) {
  const MARKS_MAX = 120, STRIP_GROUPS = 300;
  const W = 900, H = 260, padL = 64, padR = 12, padT = 14, padB = 40;
  const n = s.bcast.length, last = s.bcast[n - 1], xmax = Math.max(2, last);
  const vals = s.max_ns.concat(s.mean_ns).filter((v) => v > 0);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vals)))), hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...vals))));
  const x = (b) => padL + (W - padL - padR) * (b - 1) / (xmax - 1);
  const y = (v) => padT + (H - padT - padB) * (1 - (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / Math.max(1e-9, Math.log10(hi) - Math.log10(lo)));
  const svg = MS.svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "broadcast time per broadcast" });
  for (let v = lo; v <= hi * 1.0001; v *= 10) {
    svg.append(MS.svg("line", { x1: padL, x2: W - padR, y1: y(v), y2: y(v), class: "grid" }),
      MS.svg("text", { x: padL - 6, y: y(v), class: "ax", "text-anchor": "end", "dominant-baseline": "central", text: MS.fmtDur(v) }));
  }
  const step = MS.niceStep(xmax / 8);
  for (let b = step; b <= xmax; b += step) {
    svg.append(MS.svg("text", { x: x(b), y: H - padB + 16, class: "ax", "text-anchor": "middle", text: MS.fmtCount(b) }));
  }
  svg.append(MS.svg("text", { x: (padL + W - padR) / 2, y: H - 6, class: "ax", "text-anchor": "middle", text: "broadcast on the communicator" }));
  if (swaps.length <= MARKS_MAX) {
    for (const sw of swaps.filter((w) => w.bcast <= xmax)) {  // not one decided after the last broadcast
      const undo = sw.op === "undo", xx = x(sw.bcast);
      svg.append(MS.svg("line", { x1: xx, x2: xx, y1: padT, y2: H - padB, class: undo ? "bc-undo" : "bc-swap" },
        MS.svg("title", { text: `from broadcast ${sw.bcast}: ${sw.op} ranks ${sw.rank_a} and ${sw.rank_b} (total wait before ${MS.fmtDur(sw.total_wait_ns)}, next interval ${sw.interval})` })));
    }
  } else {
    // Too many to mark one by one: a strip above the plot, a tick per group of broadcasts
    // that had any, darker the more operations it held.
    const groups = new Map(), per = Math.max(1, Math.ceil(xmax / STRIP_GROUPS));
    for (const sw of swaps) {
      const g = Math.floor((sw.bcast - 1) / per), c = groups.get(g) || { swap: 0, undo: 0 };
      c[sw.op === "undo" ? "undo" : "swap"] += 1;
      groups.set(g, c);
    }
    const most = Math.max(...[...groups.values()].map((c) => c.swap + c.undo));
    for (const [g, c] of groups) {
      const a = g * per + 1, b = Math.min(xmax, (g + 1) * per), xx = x((a + b) / 2);
      svg.append(MS.svg("rect", { x: xx - 1, y: 0, width: Math.max(2, x(b) - x(a)), height: padT - 2, class: "bc-swap-strip",
                                  "fill-opacity": (0.25 + 0.75 * (c.swap + c.undo) / most).toFixed(2) },
        MS.svg("title", { text: `broadcasts ${a}-${b}: ${c.swap} swap${c.swap === 1 ? "" : "s"}, ${c.undo} undo${c.undo === 1 ? "" : "s"}` })));
    }
  }
  const path = (ys) => s.bcast.map((b, i) => `${i ? "L" : "M"}${x(b).toFixed(1)},${y(ys[i]).toFixed(1)}`).join("");
  svg.append(MS.svg("path", { d: path(s.max_ns), class: "bc-max" }), MS.svg("path", { d: path(s.mean_ns), class: "bc-mean" }));
  host.append(svg, swaps.length <= MARKS_MAX
    ? MS.charts.legend(["mean per process", "slowest process", "swap", "undo"],
      [MS.FAMILY_COLORS[0], "#9ecae1", MS.FAMILY_COLORS[1], MS.FAMILY_COLORS[4]])
    : MS.charts.legend(["mean per process", "slowest process", "swaps and undos (above; darker: more)"],
      [MS.FAMILY_COLORS[0], "#9ecae1", MS.FAMILY_COLORS[1]]));
};
