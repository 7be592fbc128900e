import { NO_RANK, type BpeRanks } from "./bpe-ranks.js";

/**
 * Counts the tokens of one BPE piece (a match of the encoding's split pattern): the piece's UTF-8
 * bytes start as one part each, and the adjacent pair with the lowest rank is merged until no pair
 * is a token — tiktoken's `byte_pair_merge`, as gpt-tokenizer implements it (the first of equal
 * ranks wins), so the counts are theirs. A piece that is itself a token is one. Only the number of
 * parts is kept: contextd counts tokens, it never needs their ids.
 *
 * One merger per thread: its scratch arrays grow to the longest piece seen and are reused, so a
 * count allocates nothing.
 */
export class BpeMerger {
  private readonly encoder = new TextEncoder();
  private bytes = new Uint8Array(256);
  /** starts[i]: where part i begins; the entry after the last part is the end of the piece. */
  private starts = new Int32Array(256);
  /** pairRanks[i]: the rank of parts i and i + 1 together (NO_RANK when they are not a token). */
  private pairRanks = new Int32Array(256);

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
    const { bytes, starts, pairRanks, ranks } = this;
    for (let i = 0; i <= length; i++) starts[i] = i;
    for (let i = 0; i < length - 1; i++) pairRanks[i] = ranks.rank(bytes, i, i + 2);
    pairRanks[length - 1] = NO_RANK;
    // `bounds` = parts + 1: starts[0 .. bounds - 1] are the parts' starts and the piece's end.
    let bounds = length + 1;
    while (bounds > 2) {
      let lowest = NO_RANK;
      let at = -1;
      for (let i = 0; i < bounds - 2; i++) {
        if (pairRanks[i] < lowest) {
          lowest = pairRanks[i];
          at = i;
        }
      }
      if (at < 0) break;
      // Part at + 1 joins part at.
      starts.copyWithin(at + 1, at + 2, bounds);
      pairRanks.copyWithin(at, at + 1, bounds - 1);
      bounds--;
      pairRanks[at] = at + 2 < bounds ? ranks.rank(bytes, starts[at], starts[at + 2]) : NO_RANK;
      if (at > 0) pairRanks[at - 1] = ranks.rank(bytes, starts[at - 1], starts[at + 1]);
    }
    return bounds - 1;
  }

  private grow(size: number): void {
    this.bytes = new Uint8Array(size);
    this.starts = new Int32Array(size + 1);
    this.pairRanks = new Int32Array(size + 1);
  }
}
