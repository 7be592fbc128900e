/**
 * An encoding's mergeable ranks (byte string → rank) as one flat hash table in a SharedArrayBuffer:
 * built once per process, and every counting thread looks ranks up in the same memory.
 *
 * Why not gpt-tokenizer's own tables: they are a `Map` of ~200 000 JavaScript strings (o200k), 42 MB
 * of heap in every thread that loads them — the main thread and each counting thread — which was
 * most of contextd's resident memory (bench memory). This table is ~6 MB for o200k, shared, outside
 * every heap, and answers a lookup from the bytes themselves (no UTF-8 check, no decode into a
 * string key). gpt-tokenizer still supplies the data (its generated rank list) and the split pattern.
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
   * The table of gpt-tokenizer's generated rank list: index = rank, each a string (its UTF-8 bytes)
   * or the bytes themselves (keys that are not valid UTF-8); holes are ranks not in use.
   */
  static build(rankList: readonly (string | readonly number[] | undefined)[]): BpeRanks {
    // Two passes over the list, so the keys are written straight into the shared buffer: no
    // per-key buffers (200 000 of them would be tens of MB of garbage at start).
    let n = 0;
    let byteLength = 0;
    for (let rank = 0; rank < rankList.length; rank++) {
      const key = rankList[rank];
      if (key === undefined) continue;
      n++;
      byteLength += typeof key === "string" ? Buffer.byteLength(key, "utf8") : key.length;
    }
    // At most half full: probes stay short for the misses that most lookups of a merge are.
    let slotCount = 1;
    while (slotCount < n * 2) slotCount *= 2;
    const words = HEADER_WORDS + slotCount + n * 3 + 1;
    const buffer = new SharedArrayBuffer(words * 4 + byteLength);
    new Int32Array(buffer, 0, HEADER_WORDS).set([n, slotCount, byteLength]);
    const table = new BpeRanks(buffer);
    const out = Buffer.from(buffer, words * 4, byteLength);
    let i = 0;
    let at = 0;
    for (let rank = 0; rank < rankList.length; rank++) {
      const key = rankList[rank];
      if (key === undefined) continue;
      const length = typeof key === "string" ? out.write(key, at, "utf8") : (out.set(key, at), key.length);
      const h = hashBytes(table.bytes, at, at + length);
      table.offsets[i] = at;
      table.hashes[i] = h;
      table.ranks[i] = rank;
      let slot = h & table.mask;
      while (table.slots[slot] !== 0) slot = (slot + 1) & table.mask;
      table.slots[slot] = i + 1;
      at += length;
      i++;
    }
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
