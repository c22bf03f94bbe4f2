// Frame files (docs/report-protocol.md, "Tiles"): zlib("MSF1" u32 header_len header-JSON buffers).
// Columns become typed arrays over the inflated buffer (no copy when aligned, which the format
// guarantees: 8-byte aligned buffers after a header padded to a multiple of 8).
"use strict";

MS.DTYPES = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };

MS.base64Bytes = function (b64) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
};

// zlib (RFC 1950) inflate in the browser's own decoder: no library, no worker.
MS.inflate = async function (bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
};

MS.decodeFrame = function (raw) {
  const magic = String.fromCharCode(raw[0], raw[1], raw[2], raw[3]);
  if (magic !== "MSF1") throw new Error(`not a tile (magic ${JSON.stringify(magic)})`);
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const hlen = dv.getUint32(4, true);
  const header = JSON.parse(new TextDecoder().decode(raw.subarray(8, 8 + hlen)));
  const base = raw.byteOffset + 8 + hlen;
  const tables = {};
  for (const [name, t] of Object.entries(header.tables || {})) {
    const cols = {};
    for (const [col, [dtype, offset]] of Object.entries(t.columns)) {
      const T = MS.DTYPES[dtype];
      if (!T) throw new Error(`tile column ${name}.${col} has unknown dtype ${dtype}`);
      const start = base + offset;
      cols[col] = start % T.BYTES_PER_ELEMENT === 0
        ? new T(raw.buffer, start, t.rows)
        : new T(raw.buffer.slice(start, start + t.rows * T.BYTES_PER_ELEMENT));
    }
    tables[name] = { rows: t.rows, cols };
  }
  return { attrs: header.attrs || {}, tables, bytes: raw.byteLength };
};

MS.decodeBlob = async (compressed) => MS.decodeFrame(await MS.inflate(compressed));
