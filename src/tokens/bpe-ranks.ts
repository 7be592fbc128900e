/**
 * An encoding's mergeable ranks (byte string → rank) as one flat hash table in a SharedArrayBuffer:
 * built once per process, and every counting thread looks ranks up in the same memory.
 *
 * Why not gpt-tokenizer's own tables: they are a `Map` of ~200 000 JavaScript strings (o200k), 42 MB
 * of heap in every thread that loads them — the main thread and each counting thread — which was
 * most of contextd's resident memory (bench memory). This table is ~6 MB for o200k, shared, outside
 * every heap, and answers a lookup from the bytes themselves (no UTF-8 check, no decode into a
 * string key). gpt-tokenizer still supplies the data (its `.tiktoken` files) and the split pattern.
 *
 * Layout (Int32 words, then the bytes):
 *   [0] entry count n, [1] slot count (a power of two), [2] byte length
 *   slots[slotCount]  entry index + 1 of the key hashed there (0 = empty; linear probing)
 *   hashes[n]         each entry's hash, compared before its bytes
 *   ranks[n]          each entry's rank
 *   offsets[n + 1]    where each entry's bytes start in `bytes` (the last: where they end)
 *   bytes             every key's bytes, one after the other
 */

/** Rank of a byte string that is not in the encoding (larger than any rank). */
export const NO_RANK = 0x7fffffff;

const HEADER_WORDS = 3;

/** FNV-1a over bytes[start, end): cheap, and good enough for short keys with linear probing. */
function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h | 0;
}

export class BpeRanks {
  private readonly mask: number;
  private readonly slots: Int32Array;
  private readonly hashes: Int32Array;
  private readonly ranks: Int32Array;
  private readonly offsets: Int32Array;
  private readonly bytes: Uint8Array;

  /** A view of a table that `build` made, in this thread or another (the buffer is shared, not copied). */
  constructor(readonly buffer: SharedArrayBuffer) {
    const header = new Int32Array(buffer, 0, HEADER_WORDS);
    const [n, slotCount, byteLength] = header;
    let at = HEADER_WORDS * 4;
    const words = (count: number) => {
      const view = new Int32Array(buffer, at, count);
      at += count * 4;
      return view;
    };
    this.slots = words(slotCount);
    this.hashes = words(n);
    this.ranks = words(n);
    this.offsets = words(n + 1);
    this.bytes = new Uint8Array(buffer, at, byteLength);
    this.mask = slotCount - 1;
  }

  /**
   * The table of an encoding's `.tiktoken` file (tiktoken's own format, which gpt-tokenizer ships
   * as `data/<encoding>.tiktoken` and generates its JavaScript rank lists from): one line per key,
   * `<base64 of the key's bytes> <rank>`.
   *
   * Why from this file and not gpt-tokenizer's generated list: evaluating that list — 2 MB of
   * JavaScript, 200 000 strings — took ~45 MB of memory at start that the process never gave back
   * (the peak resident set is what the memory bench measures); this reads bytes into bytes. Two
   * passes, so that the keys are decoded straight into the shared buffer: no per-key strings or
   * buffers at all.
   */
  static fromTiktoken(data: Uint8Array): BpeRanks {
    let n = 0;
    let byteLength = 0;
    forEachLine(data, (start, space) => {
      n++;
      byteLength += base64Length(data, start, space);
    });
    // At most half full: probes stay short for the misses that most lookups of a merge are.
    let slotCount = 1;
    while (slotCount < n * 2) slotCount *= 2;
    const words = HEADER_WORDS + slotCount + n * 3 + 1;
    const buffer = new SharedArrayBuffer(words * 4 + byteLength);
    new Int32Array(buffer, 0, HEADER_WORDS).set([n, slotCount, byteLength]);
    const table = new BpeRanks(buffer);
    const out = table.bytes;
    let i = 0;
    let at = 0;
    forEachLine(data, (start, space, end) => {
      const length = decodeBase64(data, start, space, out, at);
      const rank = parseRank(data, space + 1, end);
      const h = hashBytes(out, at, at + length);
      table.offsets[i] = at;
      table.hashes[i] = h;
      table.ranks[i] = rank;
      let slot = h & table.mask;
      while (table.slots[slot] !== 0) slot = (slot + 1) & table.mask;
      table.slots[slot] = i + 1;
      at += length;
      i++;
    });
    table.offsets[n] = at;
    return table;
  }

  /** The rank of bytes[start, end), or NO_RANK. */
  rank(bytes: Uint8Array, start: number, end: number): number {
    const h = hashBytes(bytes, start, end);
    const length = end - start;
    const { slots, hashes, offsets, mask } = this;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const e = slots[slot] - 1;
      if (e < 0) return NO_RANK;
      if (hashes[e] !== h) continue;
      const from = offsets[e];
      if (offsets[e + 1] - from !== length) continue;
      let i = 0;
      while (i < length && this.bytes[from + i] === bytes[start + i]) i++;
      if (i === length) return this.ranks[e];
    }
  }

  /** Entries in the table. */
  get size(): number {
    return this.hashes.length;
  }
}

/** Calls `line(start, space, end)` for each non-empty line `<key> <rank>` of a `.tiktoken` file. */
function forEachLine(data: Uint8Array, line: (start: number, space: number, end: number) => void): void {
  let start = 0;
  while (start < data.length) {
    let end = data.indexOf(0x0a, start);
    if (end < 0) end = data.length;
    if (end > start) {
      const space = data.indexOf(0x20, start);
      if (space < 0 || space > end) throw new Error(`.tiktoken line at byte ${start} has no rank`);
      line(start, space, end);
    }
    start = end + 1;
  }
}

/** base64 digit values (-1: not a digit); '=' is padding. */
const DIGITS = new Int8Array(256).fill(-1);
for (let i = 0; i < 64; i++) DIGITS["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".charCodeAt(i)] = i;
const PAD = 0x3d;

/** Decoded length of the base64 in data[start, end). */
function base64Length(data: Uint8Array, start: number, end: number): number {
  let digits = end - start;
  while (digits > 0 && data[start + digits - 1] === PAD) digits--;
  return Math.floor((digits * 6) / 8);
}

/** Decodes the base64 in data[start, end) into out at `at`; returns the bytes written. */
function decodeBase64(data: Uint8Array, start: number, end: number, out: Uint8Array, at: number): number {
  let bits = 0;
  let value = 0;
  let pos = at;
  for (let i = start; i < end && data[i] !== PAD; i++) {
    const d = DIGITS[data[i]];
    if (d < 0) throw new Error(`.tiktoken key at byte ${start} is not base64`);
    value = (value << 6) | d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[pos++] = (value >> bits) & 0xff;
    }
  }
  return pos - at;
}

/** The decimal rank in data[start, end) (a trailing carriage return is allowed). */
function parseRank(data: Uint8Array, start: number, end: number): number {
  let rank = 0;
  let digits = 0;
  for (let i = start; i < end; i++) {
    const c = data[i];
    if (c === 0x0d && i === end - 1) break;
    if (c < 0x30 || c > 0x39) throw new Error(`.tiktoken rank at byte ${start} is not a number`);
    rank = rank * 10 + (c - 0x30);
    digits++;
  }
  if (digits === 0 || rank >= NO_RANK) throw new Error(`.tiktoken rank at byte ${start} is out of range`);
  return rank;
}
