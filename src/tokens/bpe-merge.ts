import { NO_RANK, type BpeRanks } from "./bpe-ranks.js";

/**
 * Counts the tokens of one BPE piece (a match of the encoding's split pattern): the piece's UTF-8
 * bytes start as one part each, and the adjacent pair with the lowest rank is merged until no pair
 * is a token — tiktoken's `byte_pair_merge`, the first (leftmost) of equal ranks winning, so the
 * counts are tiktoken's and gpt-tokenizer's. A piece that is itself a token is one. Only the number
 * of parts is kept: contextd counts tokens, it never needs their ids.
 *
 * In O(n log n) for a piece of n bytes, whatever its shape: the parts are a linked list over byte
 * positions, and the candidate pairs sit in a binary heap ordered by (rank, position) — a merge
 * touches its two neighbouring pairs only, and a pair a merge made stale is skipped when it comes
 * up (its rank no longer the one recorded at its position). Rescanning every pair at every merge,
 * as the reference does, is quadratic in the length of a run of one letter, one space or one
 * punctuation mark, which a runtime, an imported file or an engine's answer can hold.
 *
 * One merger per thread: its scratch arrays grow to the longest piece seen and are reused, so a
 * count allocates nothing.
 */
export class BpeMerger {
  private readonly encoder = new TextEncoder();
  private bytes = new Uint8Array(256);
  /** next[i]: where the part after the one starting at byte i begins (the piece's end after the last). */
  private next = new Int32Array(257);
  /** prev[i]: where the part before the one starting at byte i begins (-1 for the first). */
  private prev = new Int32Array(257);
  /** pairRank[i]: the rank of the part at i and the next one together; NO_RANK when not a token; -1 once merged away. */
  private pairRank = new Int32Array(257);
  /** The heap of candidate pairs: ranks and positions side by side. */
  private heapRanks = new Int32Array(256);
  private heapAt = new Int32Array(256);

  constructor(private readonly ranks: BpeRanks) {}

  count(piece: string): number {
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a surrogate pair: 4 bytes for 2 units).
    if (this.bytes.length < piece.length * 3) this.grow(piece.length * 3);
    const length = this.encoder.encodeInto(piece, this.bytes).written;
    if (length <= 1) return length;
    if (this.ranks.rank(this.bytes, 0, length) !== NO_RANK) return 1;
    return this.merge(length);
  }

  private merge(length: number): number {
    const { bytes, next, prev, pairRank, ranks } = this;
    let size = 0;
    for (let i = 0; i < length; i++) {
      next[i] = i + 1;
      prev[i] = i - 1;
      const r = i + 1 < length ? ranks.rank(bytes, i, i + 2) : NO_RANK;
      pairRank[i] = r;
      if (r !== NO_RANK) size = this.push(size, r, i);
    }
    let parts = length;
    while (size > 0) {
      const r = this.heapRanks[0];
      const at = this.heapAt[0];
      size = this.pop(size);
      // A pair a merge has changed since it was pushed: its current rank is pushed too (or none).
      if (pairRank[at] !== r) continue;
      // The part after `at` joins it.
      const joined = next[at];
      const after = next[joined];
      pairRank[joined] = -1;
      next[at] = after;
      if (after < length) prev[after] = at;
      parts--;
      const right = after < length ? ranks.rank(bytes, at, next[after]) : NO_RANK;
      pairRank[at] = right;
      if (right !== NO_RANK) size = this.push(size, right, at);
      const before = prev[at];
      if (before >= 0) {
        const left = ranks.rank(bytes, before, after);
        pairRank[before] = left;
        if (left !== NO_RANK) size = this.push(size, left, before);
      }
    }
    return parts;
  }

  /** (rank, position) order: the lowest rank first, then the leftmost. */
  private before(ra: number, aa: number, rb: number, ab: number): boolean {
    return ra < rb || (ra === rb && aa < ab);
  }

  private push(size: number, rank: number, at: number): number {
    if (size === this.heapRanks.length) this.growHeap();
    const { heapRanks, heapAt } = this;
    let i = size;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(rank, at, heapRanks[parent], heapAt[parent])) break;
      heapRanks[i] = heapRanks[parent];
      heapAt[i] = heapAt[parent];
      i = parent;
    }
    heapRanks[i] = rank;
    heapAt[i] = at;
    return size + 1;
  }

  private pop(size: number): number {
    const { heapRanks, heapAt } = this;
    const last = size - 1;
    const rank = heapRanks[last];
    const at = heapAt[last];
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= last) break;
      if (child + 1 < last && this.before(heapRanks[child + 1], heapAt[child + 1], heapRanks[child], heapAt[child])) child++;
      if (!this.before(heapRanks[child], heapAt[child], rank, at)) break;
      heapRanks[i] = heapRanks[child];
      heapAt[i] = heapAt[child];
      i = child;
    }
    heapRanks[i] = rank;
    heapAt[i] = at;
    return last;
  }

  private grow(size: number): void {
    this.bytes = new Uint8Array(size);
    this.next = new Int32Array(size + 1);
    this.prev = new Int32Array(size + 1);
    this.pairRank = new Int32Array(size + 1);
  }

  private growHeap(): void {
    const ranks = new Int32Array(this.heapRanks.length * 2);
    const at = new Int32Array(this.heapAt.length * 2);
    ranks.set(this.heapRanks);
    at.set(this.heapAt);
    this.heapRanks = ranks;
    this.heapAt = at;
  }
}
