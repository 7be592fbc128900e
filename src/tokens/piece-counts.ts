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
 *
 * Why not a `Map` keyed by the piece: a piece is looked up where it lies in its text (`countOf`),
 * so a hit makes no string — with a `Map`, making the piece's string, hashing it and collecting it
 * afterwards took most of the time counting spent on a message whose pieces were all known.
 */
export class PieceCounts {
  private current: Generation;
  private previous: Generation;

  constructor(private readonly generationSize = 20_000) {
    this.current = new Generation(generationSize);
    this.previous = new Generation(1);
  }

  /**
   * The count of the piece text[start, end): remembered, or `count(piece)` — remembered from then on.
   */
  countOf(text: string, start: number, end: number, count: (piece: string) => number): number {
    const hash = hashRange(text, start, end);
    const known = this.lookup(text, start, end, hash);
    if (known >= 0) return known;
    // A slice of the text (V8 makes a long substring a view of its parent) would keep the whole
    // message alive as a key: store a flat copy.
    const piece = text.slice(start, end);
    const c = count(piece);
    this.add(piece.length >= SLICED_MIN_LENGTH ? flatCopy(piece) : piece, hash, c);
    return c;
  }

  /** The remembered count of `piece`. */
  get(piece: string): number | undefined {
    const known = this.lookup(piece, 0, piece.length, hashRange(piece, 0, piece.length));
    return known >= 0 ? known : undefined;
  }

  set(piece: string, count: number): void {
    this.add(piece, hashRange(piece, 0, piece.length), count);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }

  /** The remembered count of text[start, end), or -1. */
  private lookup(text: string, start: number, end: number, hash: number): number {
    const found = this.current.find(text, start, end, hash);
    if (found >= 0) return this.current.counts[found];
    const old = this.previous.find(text, start, end, hash);
    if (old < 0) return -1;
    // A piece still in use moves to the current generation, so it survives the next rollover and
    // is found by the first lookup from then on.
    const c = this.previous.counts[old];
    this.add(this.previous.keys[old]!, hash, c);
    return c;
  }

  private add(piece: string, hash: number, count: number): void {
    if (this.current.size >= this.generationSize) {
      this.previous = this.current;
      this.current = new Generation(this.generationSize);
    }
    this.current.insert(piece, hash, count);
  }
}

/** One generation: an open-addressing hash table at most a third full, pieces compared in place. */
class Generation {
  readonly keys: Array<string | undefined>;
  readonly counts: Int32Array;
  private readonly hashes: Int32Array;
  private readonly mask: number;
  size = 0;

  constructor(entries: number) {
    let capacity = 8;
    while (capacity < entries * 3) capacity *= 2;
    this.keys = new Array<string | undefined>(capacity).fill(undefined);
    this.counts = new Int32Array(capacity);
    this.hashes = new Int32Array(capacity);
    this.mask = capacity - 1;
  }

  /** The slot holding text[start, end), or -1. */
  find(text: string, start: number, end: number, hash: number): number {
    const length = end - start;
    for (let i = hash & this.mask; ; i = (i + 1) & this.mask) {
      const key = this.keys[i];
      if (key === undefined) return -1;
      if (this.hashes[i] === hash && key.length === length && sameRange(key, text, start)) return i;
    }
  }

  insert(piece: string, hash: number, count: number): void {
    let i = hash & this.mask;
    while (this.keys[i] !== undefined) i = (i + 1) & this.mask;
    this.keys[i] = piece;
    this.hashes[i] = hash;
    this.counts[i] = count;
    this.size++;
  }
}

/** FNV-1a over the UTF-16 units of text[start, end). */
function hashRange(text: string, start: number, end: number): number {
  let h = 0x811c9dc5 | 0;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h;
}

function sameRange(key: string, text: string, start: number): boolean {
  for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) !== text.charCodeAt(start + i)) return false;
  return true;
}

/** V8 makes substrings at least this long slices of their parent (shorter ones are copied). */
const SLICED_MIN_LENGTH = 13;

function flatCopy(s: string): string {
  return Buffer.from(s, "utf16le").toString("utf16le");
}
