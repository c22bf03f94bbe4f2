// TileSource: the one narrow interface through which the page gets data (Perfetto's tracks ask
// by start, end and resolution the same way). Tiles are keyed "b/K/I" (bins) and "e/K/I" (events).
// The base class keeps the decoded tiles in an LRU and coalesces requests; the two subclasses
// differ only in where the compressed bytes come from: the HTML itself (report) or the loopback
// server (view).
"use strict";

MS.TileSource = class {
  constructor(data, budgetBytes) {
    this.data = data;
    this.ranks = data.meta.ranks;
    this.cache = new Map();       // key -> decoded tile, in least-recently-used order
    this.pending = new Map();     // key -> promise (coalescing: one load per key)
    this.failed = new Set();
    this.cachedBytes = 0;
    this.budget = budgetBytes;
    this.listeners = [];          // called after any tile arrives (the views redraw)
  }

  static key(kind, k, i) { return `${kind}/${k}/${i}`; }

  // Decoded tile if already here (and marks it recently used), else undefined.
  peek(key) {
    const t = this.cache.get(key);
    if (t) { this.cache.delete(key); this.cache.set(key, t); }
    return t;
  }

  get(key) {
    const hit = this.peek(key);
    if (hit) return Promise.resolve(hit);
    if (this.pending.has(key)) return this.pending.get(key);
    const p = this.loadBytes(key)
      .then((bytes) => MS.decodeBlob(bytes))
      .then((tile) => {
        this.index(tile);
        this.pending.delete(key);
        this.store(key, tile);
        for (const f of this.listeners) f(key, tile);
        return tile;
      })
      .catch((err) => {
        this.pending.delete(key);
        this.failed.add(key);
        MS.fail(`tile ${key} could not be read`, err);
        throw err;
      });
    this.pending.set(key, p);
    return p;
  }

  // Ask without waiting: for tiles the view wants soon.
  request(key) {
    if (this.cache.has(key) || this.pending.has(key) || this.failed.has(key) || !this.has(key)) return;
    this.get(key).catch(() => {});
  }

  isPending(key) { return this.pending.has(key); }

  store(key, tile) {
    this.cache.set(key, tile);
    this.cachedBytes += tile.bytes;
    for (const [k, t] of this.cache) {
      if (this.cachedBytes <= this.budget) break;
      if (k === "b/0/0") continue;           // the whole-run bins are drawn all the time
      this.cache.delete(k);
      this.cachedBytes -= t.bytes;
    }
  }

  // Per-rank row ranges of an event tile (rows are sorted by rank, then t_enter), so drawing and
  // hit tests reach a rank's events by binary search, never by a scan.
  index(tile) {
    const ev = tile.tables.events;
    if (!ev) return;
    const rank = ev.cols.rank;
    const start = new Uint32Array(this.ranks + 1);
    let r = 0;
    for (let i = 0; i < ev.rows; i++) {
      while (r < rank[i] && r < this.ranks) start[++r] = i;
    }
    while (r < this.ranks) start[++r] = ev.rows;
    tile.rankStart = start;
  }

  // Whether tile `key` can be obtained at all.
  has(key) { throw new Error("abstract"); }
  loadBytes(key) { throw new Error("abstract"); }
};

// Report: tiles are base64 strings in the page's own data; decoding is lazy.
MS.EmbeddedTileSource = class extends MS.TileSource {
  constructor(data) {
    super(data, 512 * 1024 * 1024);
    this.blobs = data.tiles || {};
  }
  has(key) { return Object.prototype.hasOwnProperty.call(this.blobs, key); }
  loadBytes(key) {
    if (!this.has(key)) return Promise.reject(new Error(`tile ${key} is not in this report`));
    return Promise.resolve(MS.base64Bytes(this.blobs[key]));
  }
};

// View: tiles come from the loopback server that served the page, with the page's token; at most
// a few requests in flight, the newest request first (the view the user looks at now).
MS.FetchedTileSource = class extends MS.TileSource {
  constructor(data, token) {
    super(data, 384 * 1024 * 1024);
    this.token = token;
    this.queue = [];
    this.inflight = 0;
    this.maxInflight = 6;
  }
  has(key) {
    const [kind, k, i] = key.split("/");
    const K = Number(k), I = Number(i);
    const p = this.data.pyramid;
    if (!(I >= 0 && I < Math.pow(2, K))) return false;
    return kind === "b" ? K <= p.levels : kind === "e" && K === p.event_level;
  }
  loadBytes(key) {
    return new Promise((resolve, reject) => {
      this.queue.push({ key, resolve, reject });
      this.pump();
    });
  }
  pump() {
    while (this.inflight < this.maxInflight && this.queue.length) {
      const job = this.queue.pop();
      this.inflight++;
      fetch(`/tile/${job.key}?token=${encodeURIComponent(this.token)}`, { cache: "no-store" })
        .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`HTTP ${r.status}`))))
        .then((buf) => job.resolve(new Uint8Array(buf)), job.reject)
        .finally(() => { this.inflight--; this.pump(); });
    }
  }
};

MS.tileSourceFor = function (data) {
  if (data.meta.mode === "view") {
    return new MS.FetchedTileSource(data, new URLSearchParams(location.search).get("token") || "");
  }
  return new MS.EmbeddedTileSource(data);
};
