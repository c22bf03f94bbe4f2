// Start-up: read the payload (embedded, or from the loopback server in `view`), draw the density
// view and the time-line from the whole-run bin tile first, then the other sections.
// Test hooks (docs/report-protocol.md): window.mpiscope.{ready, timeline, density, perf}.
"use strict";

MS.loadData = async function () {
  const el = document.getElementById("mpiscope-data");
  const text = el.textContent.trim();
  const data = text && text !== "null" ? JSON.parse(text) : null;
  el.textContent = "";           // the parsed copy is all we need: halve the memory of a big report
  if (data && data.meta) return data;
  const token = new URLSearchParams(location.search).get("token") || "";
  const r = await fetch(`/data.json?token=${encodeURIComponent(token)}`, { cache: "no-store" });
  if (!r.ok) throw new Error(`the server answered ${r.status} for the trace's data`);
  return r.json();
};

MS.renderLegend = function (host, data) {
  const item = (sw, label) => MS.el("span", { class: "lg" }, sw, label);
  host.replaceChildren(
    ...(data.families || []).map((f, k) => item(MS.el("span", { class: "sw", style: `background:${MS.FAMILY_COLORS[k]}` }), f)),
    item(MS.el("span", { class: "sw sw-compute" }), "computation"),
    item(MS.el("span", { class: "sw-line" }), "message"),
    item(MS.el("span", { class: "sw-coll" }), "collective"));
};

MS.statusText = function (frame) {
  if (!frame) return "";
  // boxes drawn, MPI_Init and MPI_Finalize among them and a folded polling loop as one: not the
  // calls card's count, which is stats' (every call but those two)
  if (frame.mode === "events") return `single calls: ${MS.fmtCount(frame.states)} drawn, ${MS.fmtCount(frame.messages)} messages`;
  const est = frame.estimate !== undefined ? ` · ≈${MS.fmtCount(frame.estimate)} calls in view` : "";
  return `time share per family in each pixel${est}${frame.loading ? " · loading…" : ""}`;
};

MS.boot = async function (hooks) {
  performance.mark("mpiscope:start");
  const data = await MS.loadData();
  performance.mark("mpiscope:data");
  MS.data = data;
  MS.renderHeader(data);
  MS.renderCards(document.getElementById("cards"), data);
  const source = MS.tileSourceFor(data);
  MS.currentTile = source.get("b/0/0");
  const tile0 = await MS.currentTile;
  performance.mark("mpiscope:tile0");

  const timeline = new MS.Timeline(document.getElementById("timeline"), data, source);
  const detail = new MS.Detail(document.getElementById("detail"), data);
  timeline.attachInput(detail);
  const zoom = (a, b) => {
    timeline.setView(a, b);
    const s = document.getElementById("sec-timeline").getBoundingClientRect();
    if (s.top < 0 || s.top > window.innerHeight * 0.6) document.getElementById("sec-timeline").scrollIntoView({ behavior: "smooth" });
  };
  MS.renderNotes(document.getElementById("notes"), data, zoom);
  const density = new MS.Density(document.getElementById("density"), data, tile0,
                                 { legend: document.getElementById("density-legend") });
  density.onzoom = zoom;
  density.draw();
  timeline.listeners.push((vs, ve) => density.setView(vs, ve));
  MS.switchGroup(document.getElementById("density-metric"), (m) => density.setMetric(m));
  MS.renderLegend(document.getElementById("tl-legend"), data);
  const status = document.getElementById("tl-status");
  timeline.statusListeners = [(f) => { status.textContent = MS.statusText(f); }];
  document.getElementById("tl-in").onclick = () => timeline.zoomAround((timeline.vs + timeline.ve) / 2, 0.5);
  document.getElementById("tl-out").onclick = () => timeline.zoomAround((timeline.vs + timeline.ve) / 2, 2);
  document.getElementById("tl-reset").onclick = () => timeline.reset();
  const ranksShown = document.getElementById("tl-ranks");
  timeline.rankListeners.push((a, b) => {
    ranksShown.hidden = b - a === timeline.ranks;
    ranksShown.textContent = b - a > 1 ? `ranks ${a}–${b - 1} of ${MS.fmtCount(timeline.ranks)}` : `rank ${a} of ${MS.fmtCount(timeline.ranks)}`;
  });

  Object.assign(hooks, {
    data,
    source,
    timeline: {
      zoomTo: (a, b) => timeline.zoomTo(a, b),
      zoomRanks: (a, b) => { timeline.setRanks(a, b); return timeline.settled(); },
      view: () => timeline.view(),
      xOf: (t) => timeline.xOf(t),
      yOf: (r) => timeline.yOf(r),
      canvas: timeline.canvas,
      settled: () => timeline.settled(),
      object: timeline,
    },
    density: { darkest: () => density.darkest(), setMetric: (m) => density.setMetric(m), canvas: density.canvas },
  });
  Object.defineProperty(hooks, "perf", { enumerable: true, get: () => ({ firstPaintMs: timeline.firstPaintMs, redraws: timeline.redraws }) });
  await timeline.settled();

  // The rest after the first paint: it must not delay the time-line.
  MS.renderRankBars(document.getElementById("rank-bars"), data);
  MS.renderTop(data);
  MS.renderStats(data);
  if (data.diagnosis) MS.renderDiagnosis(data, zoom);
  if (data.bcast) MS.renderBcast(data);
  if (data.baseline) await MS.renderCompare(data, zoom);
};

(function () {
  const hooks = { readyState: "loading" };
  hooks.ready = MS.boot(hooks).then(
    () => { hooks.readyState = "ready"; },
    (e) => { hooks.readyState = `failed: ${e && e.message}`; MS.fail("the page could not start", e); throw e; });
  window.mpiscope = hooks;
})();
