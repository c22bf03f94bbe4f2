// Details of what the mouse is on (S-CAT's message view): a message, a call, a collective
// instance with every rank's enter and leave, or, zoomed out, a pixel column of a rank.
// The panel carries data-* attributes with the raw numbers for the browser tests.
"use strict";

MS.familyName = (data, f) => (data.families || [])[f] || "other";

MS.detailLine = function (item, data) {
  switch (item.kind) {
    case "message":
      return `message ${item.src} → ${item.dst} · ${MS.fmtBytes(item.bytes)} · tag ${item.tag} · ${MS.fmtDur(item.trl - item.ts)}`;
    case "event":
      return `${item.call} · rank ${item.rank} · ${MS.fmtDur(item.t1 - item.t0)}`;
    case "collective":
      return `${item.call} · ${item.members.length} ranks`;
    case "bin": {
      const mpi = item.shares.reduce((a, b) => a + b, 0);
      return `rank ${item.rank}${item.ranks > 1 ? `–${item.rank + item.ranks - 1}` : ""} · ${MS.fmtPct(100 * mpi)} in MPI`;
    }
    default:
      return "";
  }
};

MS.Detail = class {
  constructor(host, data) {
    this.host = host;
    this.data = data;
    this.show(null, false);
  }

  show(item, pinned) {
    const h = this.host;
    h.replaceChildren();
    for (const k of Object.keys(h.dataset)) delete h.dataset[k];
    if (!item) {
      h.append(MS.el("div", { class: "d-empty" }, "Point at a call or a message on the time-line for its details; click to keep them here."));
      return;
    }
    h.dataset.kind = item.kind;
    const body = this[item.kind](item);
    h.append(body);
    if (pinned) h.append(MS.el("div", { class: "d-pin" }, "kept · Esc or a click on empty space releases it"));
  }

  rows(pairs) {
    return MS.el("dl", { class: "d-list" }, pairs.filter(Boolean).map(([k, v]) => [MS.el("dt", {}, k), MS.el("dd", {}, v)]));
  }

  head(kind, title, color) {
    return MS.el("div", { class: "d-head" },
      MS.el("span", { class: "d-kind", style: color ? `background:${color}` : null }, kind), MS.el("span", { class: "d-title" }, title));
  }

  message(m) {
    const d = this.host.dataset;
    d.src = m.src; d.dst = m.dst; d.bytes = m.bytes; d.tag = m.tag;
    return MS.el("div", {},
      this.head("message", `rank ${m.src} → rank ${m.dst}`, "#111827"),
      this.rows([
        ["send time", MS.fmtAt(m.ts)],
        ["duration", `${MS.fmtDur(m.trl - m.ts)} (send entered → receive completed)`],
        ["source", `rank ${m.src}`],
        ["destination", `rank ${m.dst}`],
        ["bytes", `${MS.fmtCount(m.bytes)} B${m.bytes >= 1024 ? ` (${MS.fmtBytes(m.bytes)})` : ""}`],
        ["tag", String(m.tag)],
        ["communicator", String(m.comm)],
        ["send call site", m.send_callsite || "unknown"],
        ["receive call site", m.recv_callsite || "unknown"],
        ["send completed", MS.fmtAt(m.tsl)],
        ["receive posted", MS.fmtAt(m.tr)],
        ["receive completed", MS.fmtAt(m.trl)],
      ]));
  }

  event(e) {
    const d = this.host.dataset;
    d.rank = e.rank; d.call = e.call; d.bytes = e.bytes;
    const opt = (v, f) => (v >= 0 ? f(v) : null);
    return MS.el("div", {},
      this.head(MS.familyName(this.data, e.family), e.call, MS.FAMILY_COLORS[e.family]),
      this.rows([
        ["rank", `${e.rank}${e.thread ? `, thread ${e.thread}` : ""}`],
        ["entered", MS.fmtAt(e.t0)],
        ["left", Number.isNaN(e.t1) ? "never returned" : MS.fmtAt(e.t1)],
        // a folded polling loop spans its calls and the work between them: say how many and their time
        e.polls > 1 ? ["calls", `${MS.fmtCount(e.polls)} (a polling loop, one row)`] : null,
        ["duration", Number.isNaN(e.t1) ? "–" : MS.fmtDur(e.t1 - e.t0)],
        e.polls > 1 && !Number.isNaN(e.inside) ? ["inside MPI", MS.fmtDur(e.inside)] : null,
        e.bytes > 0 ? ["bytes", `${MS.fmtCount(e.bytes)} B`] : null,
        opt(e.peer, (v) => ["peer", `rank ${v}`]),
        opt(e.tag, (v) => ["tag", String(v)]),
        opt(e.comm, (v) => ["communicator", String(v)]),
        opt(e.root, (v) => ["root", `rank ${v}`]),
        ["call site", e.callsite || "unknown"],
        e.coll >= 0 ? ["collective", `instance ${e.coll} (click for every rank)`] : null,
      ]));
  }

  collective(c) {
    this.host.dataset.coll = c.coll;
    this.host.dataset.members = c.members.length;
    const lastEnter = Math.max(...c.members.map((m) => m.t0));
    const table = MS.el("table", { class: "d-table" },
      MS.el("thead", {}, MS.el("tr", {}, ["rank", "entered", "left", "waited"].map((h) => MS.el("th", {}, h)))),
      MS.el("tbody", {}, c.members.map((m) => MS.el("tr", { title: `in the call ${MS.fmtDur(m.t1 - m.t0)}` },
        MS.el("td", {}, String(m.rank)), MS.el("td", {}, MS.fmtTime(m.t0, 1000)), MS.el("td", {}, MS.fmtTime(m.t1, 1000)),
        MS.el("td", {}, MS.fmtDur(lastEnter - m.t0))))));
    return MS.el("div", {},
      this.head("collective", `${c.call} · instance ${c.coll}`, MS.FAMILY_COLORS[1]),
      this.rows([
        ["ranks", `${c.members.length} of ${c.ranks}`],
        ["communicator", String(c.comm)],
        c.root >= 0 ? ["root", `rank ${c.root}`] : null,
        ["first entered", MS.fmtAt(c.first_enter)],
        ["last entered", MS.fmtAt(c.last_enter)],
        ["last left", MS.fmtAt(c.last_leave)],
      ]),
      MS.el("div", { class: "d-scroll" }, table));
  }

  bin(b) {
    const ranks = b.ranks > 1 ? `ranks ${b.rank}–${b.rank + b.ranks - 1}` : `rank ${b.rank}`;
    const mpi = b.shares.reduce((a, x) => a + x, 0);
    const bars = MS.el("div", { class: "d-shares" }, b.shares.map((s, f) => s > 0.0005 ? MS.el("div", { class: "d-share" },
      MS.el("span", { class: "sw", style: `background:${MS.FAMILY_COLORS[f]}` }),
      MS.el("span", {}, MS.familyName(this.data, f)), MS.el("b", {}, MS.fmtPct(100 * s))) : null));
    return MS.el("div", {},
      this.head("time span", ranks, "#6b7280"),
      this.rows([
        ["from", MS.fmtTime(b.t0, b.t1 - b.t0)],
        ["to", MS.fmtTime(b.t1, b.t1 - b.t0)],
        ["in MPI", MS.fmtPct(100 * mpi)],
        ["computation", MS.fmtPct(100 * Math.max(0, 1 - mpi))],
        ["calls started", MS.fmtCount(b.starts)],
        ["messages", MS.fmtCount(b.msgs)],
        ["bytes", MS.fmtBytes(b.bytes)],
      ]),
      bars,
      MS.el("div", { class: "d-hint" }, "Zoom in for single calls and messages."));
  }
};
