/**
 * Token counts of BPE pieces, remembered. Byte-pair encoding splits text into pieces (words with
 * their leading space, number groups, punctuation runs, whitespace) by a fixed regular expression and
 * encodes each piece on its own, so a piece's count never depends on its neighbours. Conversations
 * repeat their pieces (identifiers, paths, common words): counting a repeated multi-token piece
 * again is most of BPE's cost.
 *
 * Why not gpt-tokenizer's own merge cache: it is an LRU over a `Map` (a delete and a set on every
 * hit), and after a few million tokens of varied text counting became 3–10× slower and erratic
 * (bench/tokenizer). This one has two generations instead: a piece is looked up in the current one,
 * then the previous (and moved to the current one when found there); when the current one is full it
 * becomes the previous and the oldest is dropped whole. A hit costs a lookup or two, nothing is
 * deleted one by one, and the memory is bounded by two generations of short strings (~2 × 20 000
 * pieces, a few MB).
 */
export class PieceCounts {
  private current = new Map<string, number>();
  private previous = new Map<string, number>();

  constructor(private readonly generationSize = 20_000) {}

  get(piece: string): number | undefined {
    const count = this.current.get(piece);
    if (count !== undefined) return count;
    const old = this.previous.get(piece);
    // A piece still in use moves to the current generation, so it survives the next rollover and
    // is found by the first lookup from then on.
    if (old !== undefined) this.set(piece, old);
    return old;
  }

  set(piece: string, count: number): void {
    if (this.current.size >= this.generationSize) {
      this.previous = this.current;
      this.current = new Map();
    }
    // A regex match is a slice of the whole message in V8, and as a key it would keep the message
    // alive: store a flat copy (this runs on a miss only, next to a BPE merge that costs far more).
    this.current.set(piece.length >= SLICED_MIN_LENGTH ? flatCopy(piece) : piece, count);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }
}

/** V8 makes substrings at least this long slices of their parent (shorter ones are copied). */
const SLICED_MIN_LENGTH = 13;

function flatCopy(s: string): string {
  return Buffer.from(s, "utf16le").toString("utf16le");
}
