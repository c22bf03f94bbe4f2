// Summary: the run at a glance (program, ranks, hosts, MPI, duration, time in MPI), notes and
// warnings, computation vs MPI per rank, the most expensive calls and call sites.
"use strict";

MS.COMPUTE_COLOR = "#cfd6df";

// Columns named by their unit (the tables' convention: *_ns, *bytes*, *pct*) get their format.
MS.fmtAuto = function (key) {
  if (/_ns$/.test(key)) return MS.fmtDur;
  if (/pct/.test(key)) return MS.fmtPct;
  // received bytes are recorded for collectives only: a point-to-point call's 0 means none recorded
  if (key === "recv_bytes") return (v) => (v ? MS.fmtBytes(v) : "–");
  if (/bytes/.test(key)) return MS.fmtBytes;
  if (/seconds$/.test(key)) return (v) => MS.fmtDur(v * 1e9);
  return (v) => (typeof v === "number" ? (Number.isInteger(v) ? MS.fmtCount(v) : v.toPrecision(4)) : v === null || v === undefined ? "–" : String(v));
};

// "CommSBN(Domain&, int, double& (Domain::**)(int)) (lulesh-comm.cc:911)" -> "CommSBN(…) (lulesh-comm.cc:911)":
// a cell cut at its end would lose the line, the one part that tells a function's call sites apart
// (the cell's title keeps the whole signature).
MS.shortSite = function (v) {
  const s = v === null || v === undefined ? "–" : String(v), i = s.lastIndexOf(" (");
  if (s.length <= 48 || i <= 0) return s;
  const j = s.indexOf("(");
  return j > 0 && j < i ? `${s.slice(0, j)}(…)${s.slice(i)}` : s;
};

MS.columnsFor = function (rows, labels, order) {
  const keys = order.filter((k) => rows.length && k in rows[0]);
  for (const k of Object.keys(rows[0] || {})) if (!keys.includes(k)) keys.push(k);
  return keys.map((k) => ({ key: k, label: labels[k] || k.replace(/_/g, " "),
                            fmt: k === "callsite" ? MS.shortSite : MS.fmtAuto(k),
                            num: rows.length > 0 && typeof rows[0][k] === "number", full: k === "callsite" }));
};

MS.LABELS = {
  call: "call", callsite: "call site", count: "calls", total_ns: "total time", mean_ns: "mean", max_ns: "max",
  bytes: "bytes", mean_bytes: "mean bytes", pct_mpi: "% of MPI", rank: "rank", app_time_ns: "application",
  mpi_time_ns: "in MPI", outside_mpi_ns: "computation", mpi_pct: "% MPI", calls: "calls", messages_sent: "msgs sent",
  bytes_sent: "bytes sent", messages_received: "msgs recv", bytes_received: "bytes recv", ranks: "ranks",
  collective_bytes_sent: "coll. bytes sent", collective_bytes_received: "coll. bytes recv", recv_bytes: "bytes recv",
  rma_bytes_put: "one-sided put", rma_bytes_get: "one-sided get", io_time_ns: "in MPI-IO", io_bytes_read: "file read",
  io_bytes_written: "file written",
};

// The program a launcher ran (its base name; mpiscope's own builds end in a 16-hex-digit hash).
// The program a run started, as the recorder read it from its launcher command (the launchers'
// options that take values are known there: "-x OMP_NUM_THREADS" is no program).
MS.programOf = (meta) => MS.basename(meta.program || (meta.command || [])[0] || "").replace(/-[0-9a-f]{16}$/, "");

MS.renderHeader = function (data) {
  const m = data.meta, cmd = (m.command || []).join(" ");
  document.getElementById("run-command").textContent = cmd;
  document.getElementById("run-command").title = cmd;
  const prog = MS.programOf(m);
  if (prog) document.getElementById("run-title").textContent = prog;
  const footer = document.getElementById("footer");
  footer.append(`run ${m.run_id || "?"} · ${m.trace_dir || ""} · ${m.generated_by || "mpiscope"} · ` +
    `${m.mode === "view" ? "live view of the trace" : "self-contained report"}`);
};

// "2 hosts: a (8 CPUs), b (8 CPUs)": the CPUs are those the ranks could run on (their affinity).
MS.hostsLine = function (hosts, cpus) {
  const name = (h) => (cpus[h] ? `${h} (${cpus[h]} CPU${cpus[h] === 1 ? "" : "s"})` : h);
  return `${hosts.length || "?"} host${hosts.length === 1 ? "" : "s"}${hosts.length && hosts.length <= 3 ? `: ${hosts.map(name).join(", ")}` : ""}`;
};

MS.renderCards = function (host, data) {
  const m = data.meta, pr = (data.summary && data.summary.per_rank) || [];
  const app = pr.reduce((a, r) => a + (r.app_time_ns || 0), 0), mpi = pr.reduce((a, r) => a + (r.mpi_time_ns || 0), 0);
  const bytes = pr.reduce((a, r) => a + (r.bytes_sent || 0), 0);
  // every call, as stats and the per-rank table count them (a folded polling loop is `count` calls,
  // not one); the tables' rows only where no per-rank figures came
  const calls = pr.length ? pr.reduce((a, r) => a + (r.calls || 0), 0) : m.events;
  const hosts = new Set(Object.values(m.hosts || {}));
  const unmatched = (m.unmatched_sends || 0) + (m.unmatched_recvs || 0);
  const card = (label, value, sub, cls) => MS.el("div", { class: `card ${cls || ""}` },
    MS.el("div", { class: "c-label" }, label), MS.el("div", { class: "c-value", title: value }, value),
    sub ? MS.el("div", { class: "c-sub" }, sub) : null);
  host.append(
    card("ranks", MS.fmtCount(m.ranks), MS.hostsLine([...hosts], m.host_cpus || {})),
    card("duration", MS.fmtDur(m.span_ns), m.stopped ? "first MPI event to the stop (a signal)" : "first to last MPI event"),
    card("time in MPI", app ? MS.fmtPct(100 * mpi / app) : "–", "of the ranks' application time"),
    // the name alone fits the card ("Open MPI 4.1.4" was cut to "Open MPI 4…"); the version under it
    card("MPI", (m.mpi && m.mpi.implementation) || "unknown", m.mpi && m.mpi.version ? `version ${m.mpi.version}` : ""),
    card("calls", MS.fmtCount(calls), `${MS.fmtCount(m.collectives)} collective instances`),
    card("messages", MS.fmtCount(m.messages), `${MS.fmtBytes(bytes)} point-to-point`),
    card("unmatched", MS.fmtCount(unmatched), `${m.unmatched_sends || 0} sends, ${m.unmatched_recvs || 0} receives`, unmatched ? "warn" : ""),
  );
};

MS.renderNotes = function (host, data, zoom) {
  for (const w of data.meta.warnings || []) host.append(MS.el("div", { class: "note warn" }, String(w)));
  const d = data.detail;
  if (data.meta.mode !== "view" && d && !d.complete) {
    const merged = MS.mergeWindows(d.windows || []), shown = merged.slice(0, 8);
    const wins = shown.map(([a, b], i) => [MS.el("a", { href: "#sec-timeline", onclick: () => zoom(a, b) },
      `${MS.fmtTime(a, (b - a) / 100)} – ${MS.fmtTime(b, (b - a) / 100)}`), i < shown.length - 1 ? ", " : ""]);
    if (merged.length > shown.length) wins.push(` and ${merged.length - shown.length} more`);
    host.append(MS.el("div", { class: "note info" },
      MS.el("b", {}, "Single calls are embedded for part of the run only. "),
      wins.length ? ["Full detail: ", wins, " (green on the time axis). "] : "No window has full detail. ",
      "Elsewhere the time-line shows the time share of each family per pixel. To see every call of the run: ",
      MS.el("code", {}, `mpiscope view ${data.meta.trace_dir || "TRACE"}`)));
  }
};

// Adjacent windows (neighbouring tiles) read as one.
MS.mergeWindows = function (windows) {
  const out = [];
  for (const [a, b] of windows.slice().sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1];
    if (last && a <= last[1] * (1 + 1e-12)) last[1] = Math.max(last[1], b); else out.push([a, b]);
  }
  return out;
};

MS.perFamily = function (data, rank) {
  const pf = data.stats && data.stats.per_family;
  if (!pf) return null;
  const row = Array.isArray(pf) ? pf[rank] : pf[String(rank)];
  if (!row) return null;
  if (Array.isArray(row)) return row.slice(0, MS.FAMILY_COLORS.length).map(Number);
  const fams = data.families || [];
  if (row.ns && Array.isArray(row.ns)) return row.ns.map(Number);
  return fams.map((f) => Number(row[f] || row[`${f}_ns`] || 0));
};

MS.renderRankBars = function (host, data) {
  const pr = (data.summary && data.summary.per_rank) || [];
  const fams = data.families || [];
  const rows = pr.map((r) => {
    const pf = MS.perFamily(data, r.rank);
    const parts = pf ? [r.outside_mpi_ns || 0, ...pf] : [r.outside_mpi_ns || 0, r.mpi_time_ns || 0];
    return { label: String(r.rank), parts, note: `${MS.fmtPct(r.mpi_pct || 0)} MPI · ${MS.fmtDur(r.app_time_ns)}` };
  });
  const withFam = rows.length && rows[0].parts.length === 1 + MS.FAMILY_COLORS.length;
  MS.charts.rankBars(host, rows, {
    label: "computation and MPI time per rank",
    names: withFam ? ["computation", ...fams.map((f) => `MPI: ${f}`)] : ["computation", "MPI"],
    colors: withFam ? [MS.COMPUTE_COLOR, ...MS.FAMILY_COLORS] : [MS.COMPUTE_COLOR, MS.FAMILY_COLORS[0]],
  });
};

MS.renderTop = function (data) {
  const s = data.summary || {};
  const calls = s.top_calls || [], sites = s.top_callsites || [];
  MS.charts.table(document.getElementById("top-calls"), MS.columnsFor(calls, MS.LABELS, ["call", "count", "total_ns", "pct_mpi"])
    .filter((c) => ["call", "count", "total_ns", "pct_mpi"].includes(c.key)), calls);
  MS.charts.table(document.getElementById("top-sites"), MS.columnsFor(sites, MS.LABELS, ["call", "callsite", "count", "total_ns", "pct_mpi"])
    .filter((c) => ["call", "callsite", "count", "total_ns", "pct_mpi"].includes(c.key)), sites);
};
