// Statistics, Compare and Diagnosis sections (the last two only when the payload has them).
"use strict";

MS.renderStats = function (data) {
  const st = data.stats || {};
  const s = (id) => document.getElementById(id);
  const pc = st.per_call || [], pr = (data.summary && data.summary.per_rank) || [], cs = st.callsites || [];
  MS.charts.table(s("per-call"), MS.columnsFor(pc, MS.LABELS, ["call", "count", "total_ns", "mean_ns", "max_ns", "bytes", "pct_mpi"]), pc, { sort: "total_ns" });
  s("per-call-note").hidden = !st.posted_note;
  s("per-call-note").textContent = st.posted_note || "";
  MS.charts.table(s("per-rank"), MS.columnsFor(pr, MS.LABELS, ["rank", "app_time_ns", "mpi_time_ns", "outside_mpi_ns", "mpi_pct"]), pr);
  MS.charts.table(s("callsites"), MS.columnsFor(cs, MS.LABELS, ["call", "callsite", "count", "ranks", "total_ns", "pct_mpi"]), cs, { sort: "total_ns" });
  const matrix = st.matrix || {};
  s("matrix-metric").querySelector('[data-metric="one_sided"]').hidden = !matrix.one_sided;
  MS.charts.matrix(s("matrix"), matrix, "bytes");
  MS.switchGroup(s("matrix-metric"), (m) => MS.charts.matrix(s("matrix"), matrix, m));
  MS.charts.histogram(s("size-hist"), st.size_hist || []);
};

// A row of toggle buttons (data-metric): calls back with the chosen metric.
MS.switchGroup = function (group, onchange) {
  group.addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (!b) return;
    group.querySelectorAll("button").forEach((x) => x.classList.toggle("on", x === b));
    onchange(b.dataset.metric);
  });
};

// Two density views on one relative time scale (003 Fig. 7), then each rank's computation
// before and after (003 Tables 2 and 3).
MS.renderCompare = async function (data, zoom) {
  const b = data.baseline, host = document.getElementById("compare");
  document.getElementById("sec-compare").hidden = false;
  document.querySelector('#nav a[href="#sec-compare"]').hidden = false;
  const baseTile = await MS.decodeBlob(MS.base64Bytes(b.density));
  const cur = await MS.currentTile;
  const scale = Math.max(b.meta.span_ns, data.meta.span_ns);
  const label = b.label || b.meta.run_id || "baseline";
  const mk = (title, d, tile) => {
    const box = MS.el("div", { class: "density cmp" });
    host.append(MS.el("h3", {}, title), box);
    const v = new MS.Density(box, d, tile, { spanScale: scale });
    v.draw();
    return v;
  };
  const before = mk(`Before: ${label} · ${MS.fmtDur(b.meta.span_ns)}`, b, baseTile);
  const after = mk(`After: this run · ${MS.fmtDur(data.meta.span_ns)}`, data, cur);
  after.onzoom = zoom;
  MS.switchGroup(document.getElementById("density-metric"), (m) => { before.setMetric(m); after.setMetric(m); });
  const nowRows = (data.summary && data.summary.per_rank) || [];
  const beforeNs = b.compute_ns || [];
  const rows = nowRows.map((r, i) => {
    const was = Array.isArray(beforeNs) ? beforeNs[i] : beforeNs[String(r.rank)];
    return { rank: r.rank, before_ns: was, after_ns: r.outside_mpi_ns,
             change_pct: was ? 100 * (r.outside_mpi_ns - was) / was : null };
  });
  const vals = (k) => rows.map((r) => r[k]).filter((v) => typeof v === "number");
  const spread = (v) => (v.length ? Math.max(...v) - Math.min(...v) : 0);
  const maxB = Math.max(...vals("before_ns")), maxA = Math.max(...vals("after_ns"));
  host.append(MS.el("p", { class: "lead" },
    `Slowest rank's computation: ${MS.fmtDur(maxB)} → ${MS.fmtDur(maxA)} (${maxA >= maxB ? "+" : ""}${MS.fmtPct(100 * (maxA - maxB) / maxB)}); ` +
    `spread between ranks: ${MS.fmtDur(spread(vals("before_ns")))} → ${MS.fmtDur(spread(vals("after_ns")))}; ` +
    `run: ${MS.fmtDur(b.meta.span_ns)} → ${MS.fmtDur(data.meta.span_ns)}.`));
  const bars = MS.el("div", {});
  host.append(MS.el("h3", {}, "Computation per rank, before and after"), bars);
  const barRows = [];
  for (const r of rows) {
    barRows.push({ label: `${r.rank}`, parts: [r.before_ns || 0], note: `before ${MS.fmtDur(r.before_ns)}` });
    barRows.push({ label: "", parts: [0, r.after_ns || 0], note: `after ${MS.fmtDur(r.after_ns)}` });
  }
  MS.charts.rankBars(bars, barRows, { label: "computation before and after", names: ["before", "after"], colors: ["#9aa3af", MS.FAMILY_COLORS[0]] });
  const t = MS.el("div", { class: "table-wrap" });
  host.append(t);
  MS.charts.table(t, [
    { key: "rank", label: "rank", num: true },
    { key: "before_ns", label: "computation before", num: true, fmt: MS.fmtDur },
    { key: "after_ns", label: "computation after", num: true, fmt: MS.fmtDur },
    { key: "change_pct", label: "change", num: true, fmt: (v) => (v === null ? "–" : `${v > 0 ? "+" : ""}${MS.fmtPct(v)}`) },
  ], rows);
  return { before, after };
};

MS.renderDiagnosis = function (data, zoom) {
  const d = data.diagnosis, host = document.getElementById("diagnosis");
  document.getElementById("sec-diagnosis").hidden = false;
  document.querySelector('#nav a[href="#sec-diagnosis"]').hidden = false;
  const findings = d.findings || [], crowded = d.oversubscribed;
  // facts of the run, inside every finding below: said before them, not ranked among them
  if (d.ended_early) host.append(MS.el("div", { class: "note warn" }, d.ended_early[0].toUpperCase() + d.ended_early.slice(1)));
  if (crowded) host.append(MS.el("div", { class: "note warn" }, MS.el("b", {}, "Oversubscribed: "), crowded.text,
    MS.el("p", { class: "f-do" }, "What to do: ", MS.el("code", {}, crowded.suggestion))));
  host.append(MS.el("h3", {}, "Findings"));
  if (!findings.length) host.append(MS.el("p", { class: "muted" }, "Nothing to report: no wait state or imbalance stands out."));
  host.append(MS.el("ol", { class: "findings" }, findings.map((f) => MS.el("li", { class: "finding" },
    MS.el("div", { class: "f-head" }, MS.el("span", { class: "badge" }, String(f.kind || "finding").replace(/_/g, " ")),
      typeof f.seconds === "number" ? MS.el("span", { class: "f-sec", title: "time lost, summed over the ranks that lost it" },
        `${MS.fmtDur(f.seconds * 1e9)} rank time`) : null,
      f.ranks && f.ranks.length ? MS.el("span", { class: "f-ranks" }, `rank${f.ranks.length > 1 ? "s" : ""} ${f.ranks.slice(0, 12).join(", ")}${f.ranks.length > 12 ? ", …" : ""}`) : null),
    MS.el("p", {}, f.text || ""),
    f.suggestion ? MS.el("p", { class: "f-do" }, "What to do: ", MS.el("code", {}, f.suggestion)) : null))));
  // what the diagnosis assumed or left out (a run that ended early, the eager limit it inferred)
  if ((d.notes || []).length) host.append(MS.el("ul", { class: "diag-notes muted" }, d.notes.map((n) => MS.el("li", {}, n))));
  const ws = (d.wait_states || []).map((w) => ({ ...w, caused_by: (w.caused_by || []).map((c) => `rank ${c.rank}${c.callsite ? ` at ${c.callsite}` : ""} (${MS.fmtDur(c.seconds * 1e9)})`).join("; ") }));
  if (ws.length) {
    host.append(MS.el("h3", {}, "Wait states"));
    const t = MS.el("div", { class: "table-wrap" });
    host.append(t);
    MS.charts.table(t, MS.columnsFor(ws, { ...MS.LABELS, seconds: "waiting", caused_by: "caused by" },
      ["pattern", "rank", "call", "callsite", "instances", "seconds", "caused_by"]), ws, { sort: "seconds" });
  }
  MS.renderPhases(host, d, data, zoom);
  const cp = d.critical_path;
  if (cp && cp.share_by_rank) {
    host.append(MS.el("h3", {}, `Critical path: ${MS.fmtDur((cp.seconds || 0) * 1e9)}`));
    const share = cp.share_by_rank;
    const entries = Array.isArray(share) ? share.map((v, i) => [i, v]) : Object.entries(share).map(([k, v]) => [Number(k), v]);
    const bars = MS.el("div", {});
    host.append(bars);
    MS.charts.rankBars(bars, entries.map(([r, v]) => ({ label: String(r), parts: [v], note: MS.fmtPct(100 * v) })),
      { label: "share of the critical path per rank", names: ["share of the critical path"], colors: [MS.FAMILY_COLORS[1]] });
  }
  const hs = d.hot_spots || [];
  if (Array.isArray(hs) && hs.length && typeof hs[0] === "object") {
    host.append(MS.el("h3", {}, "Hot spots"));
    const t = MS.el("div", { class: "table-wrap" });
    host.append(t);
    MS.charts.table(t, MS.columnsFor(hs, MS.LABELS, ["rank"]), hs);
  }
};

// Load imbalance per phase (phases cut at collectives of all ranks); a row click zooms the
// time-line to the phase. A run of many phases comes as groups of consecutive phases (the
// diagnosis' JSON: grouped, index..last_index, their computation summed), followed by the single
// phases that lost the most time, which the findings name.
MS.renderPhases = function (host, d, data, zoom) {
  const imb = d.imbalance || {};
  const phases = imb.phases || [];
  if (!phases.length) return;
  const rel = (t) => (t >= data.meta.t0_ns ? t - data.meta.t0_ns : t);
  const grouped = !!imb.grouped;
  host.append(MS.el("h3", {}, "Load imbalance per phase"),
    MS.el("p", { class: "muted" }, "Imbalance = (max − mean) / max of the ranks' computation in the phase. " +
      (grouped ? `${(imb.phase_count || 0).toLocaleString("en-US")} phases, shown as ${phases.length} groups of up to ` +
        `${imb.phases_per_entry} consecutive phases (their computation summed). ` : "") +
      "Click a phase to see it on the time-line."));
  const worst = grouped ? (imb.worst_phases || []) : [];
  const maxImb = Math.max(1, ...phases.concat(worst).map((p) => p.imbalance_pct || 0));
  const BAR_PX = 110;
  const label = (p) => (p.last_index !== undefined && p.last_index !== p.index ? `${p.index}–${p.last_index}` : String(p.index));
  const row = (p) => {
    const comp = p.compute_seconds || [];
    const vals = Array.isArray(comp) ? comp : Object.values(comp);
    const pct = p.imbalance_pct || 0;
    return MS.el("tr", { class: "clickable", onclick: () => zoom(rel(p.t_start_ns), rel(p.t_end_ns)) },
      MS.el("td", { class: "num" }, label(p)),
      MS.el("td", { class: "num" }, MS.fmtTime(rel(p.t_start_ns), 1e3)),
      MS.el("td", { class: "num" }, MS.fmtDur(p.t_end_ns - p.t_start_ns)),
      MS.el("td", { class: "num" }, vals.length ? MS.fmtDur(Math.max(...vals) * 1e9) : "–"),
      MS.el("td", {}, MS.el("span", { class: "imb" }, MS.el("span", { class: "imb-bar", style: `width:${(BAR_PX * pct / maxImb).toFixed(1)}px` }),
        MS.el("span", { class: "imb-val" }, MS.fmtPct(pct)))),
      MS.el("td", { class: "num" }, p.critical_rank === undefined || p.critical_rank === null ? "–" : String(p.critical_rank)));
  };
  const table = (list, first) => MS.el("div", { class: "table-wrap" }, MS.el("table", { class: "data" },
    MS.el("thead", {}, MS.el("tr", {}, [first, "start", "length", "slowest computation", "imbalance", "critical rank"].map((h, i) => MS.el("th", { class: i === 4 ? "" : "num" }, h)))),
    MS.el("tbody", {}, list.slice(0, 500).map(row))));
  host.append(table(phases, grouped ? "phases" : "phase"));
  if (worst.length) {
    host.append(MS.el("h4", {}, `The ${worst.length} phases that lost the most time`), table(worst, "phase"));
  }
};
