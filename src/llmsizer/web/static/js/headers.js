// Read the header of a model file in the browser, never its weights: File.slice reads only the bytes asked for.
//   .gguf         magic, version, metadata and tensor table (ggml docs/gguf.md), walked here to find where the
//                 tensor table ends; the bytes up to there are sent, none of the tensor data after it.
//   .safetensors  the 8-byte length and the JSON header that follows it.
//   config.json   the file (at most MAX_CONFIG bytes).

export const MAX_CONFIG = 1 << 20;
export const MAX_HEADER = 32 << 20; // the server takes model-file headers up to 32 MiB (API.md)
const GGUF_SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8, ARRAY = 9;

export class HeaderError extends Error {}

/** A growing window over the start of a file: reads more with File.slice only when the parser needs it. */
class Window {
  constructor(file) { this.file = file; this.bytes = new Uint8Array(0); this.view = new DataView(this.bytes.buffer); }
  async need(end) {
    if (end <= this.bytes.length) return;
    if (end > this.file.size) throw new HeaderError(`${this.file.name}: truncated GGUF header (needs byte ${end}, the file has ${this.file.size})`);
    if (end > MAX_HEADER) throw new HeaderError(`${this.file.name}: GGUF header over ${MAX_HEADER >> 20} MiB`);
    const size = Math.min(this.file.size, Math.max(end, this.bytes.length * 2, 64 << 10));
    this.bytes = new Uint8Array(await this.file.slice(0, size).arrayBuffer());
    this.view = new DataView(this.bytes.buffer);
  }
}

/** The GGUF header of ``file``: {bytes: the file's first bytes, up to the end of its tensor table}. */
export async function ggufHeader(file) {
  const w = new Window(file);
  let pos = 0;
  const u32 = async () => { await w.need(pos + 4); const v = w.view.getUint32(pos, true); pos += 4; return v; };
  const u64 = async () => {
    await w.need(pos + 8);
    const v = Number(w.view.getBigUint64(pos, true)); pos += 8;
    if (!Number.isSafeInteger(v)) throw new HeaderError(`${file.name}: a GGUF count is out of range at byte ${pos - 8}`);
    return v;
  };
  const skipString = async () => { const n = await u64(); await w.need(pos + n); pos += n; };
  const skipValue = async (type, depth = 0) => {
    if (type in GGUF_SCALAR) { await w.need(pos + GGUF_SCALAR[type]); pos += GGUF_SCALAR[type]; return; }
    if (type === STRING) { await skipString(); return; }
    if (type !== ARRAY || depth > 8) throw new HeaderError(`${file.name}: unknown GGUF value type ${type} at byte ${pos}`);
    const inner = await u32();
    const n = await u64();
    if (inner in GGUF_SCALAR) { await w.need(pos + n * GGUF_SCALAR[inner]); pos += n * GGUF_SCALAR[inner]; }
    else for (let i = 0; i < n; i += 1) await skipValue(inner, depth + 1);
  };

  await w.need(24);
  const magic = new TextDecoder().decode(w.bytes.subarray(0, 4));
  if (magic !== "GGUF") throw new HeaderError(`${file.name}: not a GGUF file (starts with ${JSON.stringify(magic)})`);
  pos = 4;
  const version = await u32();
  if (version !== 2 && version !== 3) throw new HeaderError(`${file.name}: GGUF version ${version} (2 and 3 are read)`);
  const nTensors = await u64();
  const nKv = await u64();
  for (let i = 0; i < nKv; i += 1) {
    await skipString(); // the key
    await skipValue(await u32());
  }
  for (let i = 0; i < nTensors; i += 1) {
    await skipString();
    const dims = await u32();
    if (dims > 4) throw new HeaderError(`${file.name}: a tensor with ${dims} dimensions at byte ${pos} (at most 4)`);
    await w.need(pos + dims * 8 + 12);
    pos += dims * 8 + 12; // shape, ggml type (u32), offset (u64)
  }
  return { bytes: w.bytes.slice(0, pos) };
}

/** The safetensors header of ``file``: the 8-byte little-endian length and the JSON it announces. */
export async function safetensorsHeader(file) {
  if (file.size < 8) throw new HeaderError(`${file.name}: not a safetensors file (${file.size} bytes)`);
  const head = new DataView(await file.slice(0, 8).arrayBuffer());
  const n = Number(head.getBigUint64(0, true));
  if (n <= 0 || n > MAX_HEADER || 8 + n > file.size) {
    throw new HeaderError(`${file.name}: not a safetensors file (announces a ${n}-byte header in a ${file.size}-byte file)`);
  }
  return { bytes: new Uint8Array(await file.slice(0, 8 + n).arrayBuffer()) };
}

export async function configText(file) {
  if (file.size > MAX_CONFIG) throw new HeaderError(`${file.name}: ${file.size} bytes is not a config.json (at most ${MAX_CONFIG})`);
  const text = await file.text();
  try { JSON.parse(text); } catch (e) { throw new HeaderError(`${file.name}: not JSON (${e.message})`); }
  return text;
}
