/**
 * o200k_base's split pattern, by hand, for the text most messages are: ASCII. BPE counting spends
 * more time finding pieces with the pattern (a Unicode-property regular expression, a match array
 * and a string per piece) than counting them from the cache, and on ASCII the pattern's seven
 * alternatives reduce to a few character classes: letters A–Z and a–z, digits, whitespace
 * (\t \n \v \f \r and space), and everything else.
 *
 * `asciiPieceEnd` answers where the piece starting at `start` ends — the end the pattern's match
 * from `start` has — or -1 when that depends on a character above U+007F (a letter, digit, mark or
 * space of another script may extend or end the piece): the caller then asks the pattern. Each
 * call reads the characters of one piece and at most one after it, so a text is scanned in linear
 * time (a whitespace run at most twice). test/tokens/ascii-pieces.test.ts checks it against the
 * pattern on arbitrary text.
 *
 * The pattern (gpt-tokenizer's O200K_TOKEN_SPLIT_REGEX), alternatives in the order they are tried:
 *   1. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'s|'d|'m|'t|'ll|'ve|'re)?
 *   2. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'s|…)?
 *   3. \p{N}{1,3}
 *   4.  ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   5. \s*[\r\n]+
 *   6. \s+(?!\S)
 *   7. \s+
 * (the contractions in either case).
 */

const UPPER = 1;
const LOWER = 2;
const DIGIT = 3;
/** Whitespace other than \r and \n (it may prefix a word: alternatives 1 and 2). */
const SPACE = 4;
const NEWLINE = 5;
/** Neither letter, digit nor whitespace: punctuation, symbols, control characters. */
const OTHER = 6;

const CLASS = new Uint8Array(128).fill(OTHER);
for (let c = 65; c <= 90; c++) CLASS[c] = UPPER;
for (let c = 97; c <= 122; c++) CLASS[c] = LOWER;
for (let c = 48; c <= 57; c++) CLASS[c] = DIGIT;
for (const c of [9, 11, 12, 32]) CLASS[c] = SPACE;
CLASS[10] = NEWLINE;
CLASS[13] = NEWLINE;

/** The character class at `i` (0 past the end), or -1 for a character above U+007F. */
function classAt(text: string, i: number): number {
  if (i >= text.length) return 0;
  const c = text.charCodeAt(i);
  return c < 128 ? CLASS[c] : -1;
}

/** The end of an optional contraction ('s, 'd, 'm, 't, 'll, 've, 're in either case) at `i`. */
function contractionEnd(text: string, i: number): number {
  if (text.charCodeAt(i) !== 39) return i;
  const a = text.charCodeAt(i + 1) | 0x20;
  if (a === 0x73 || a === 0x64 || a === 0x6d || a === 0x74) return i + 2; // s d m t
  const b = text.charCodeAt(i + 2) | 0x20;
  if ((a === 0x6c && b === 0x6c) || (a === 0x76 && b === 0x65) || (a === 0x72 && b === 0x65)) return i + 3; // ll ve re
  return i;
}

/**
 * Where o200k_base's piece that starts at `start` (a piece boundary, before the text's end) ends,
 * or -1 when a character above U+007F decides it.
 */
export function asciiPieceEnd(text: string, start: number): number {
  const first = classAt(text, start);
  if (first < 0) return -1;
  // Alternatives 1 and 2: letters, after at most one character that is not a letter, digit, \r or \n.
  const letters = first === SPACE || first === OTHER ? start + 1 : start;
  if (letters > start || first === UPPER || first === LOWER) {
    let u = letters;
    let k = classAt(text, u);
    while (k === UPPER) k = classAt(text, ++u);
    let l = u;
    while (k === LOWER) k = classAt(text, ++l);
    if (k < 0) return -1;
    // 1: upper case then lower case; 2: upper case alone (then no lower case follows).
    if (l > u) return contractionEnd(text, l);
    if (u > letters) return contractionEnd(text, u);
    // No letter after the prefix: the other alternatives, from `start`.
  }
  if (first === DIGIT) {
    let e = start + 1;
    while (e < start + 3) {
      const k = classAt(text, e);
      if (k < 0) return -1;
      if (k !== DIGIT) break;
      e++;
    }
    return e;
  }
  // 4: an optional space, then punctuation, then any \r, \n and /.
  let p = start;
  if (text.charCodeAt(start) === 32) {
    const next = classAt(text, start + 1);
    if (next < 0) return -1;
    if (next === OTHER) p = start + 1;
  }
  if (classAt(text, p) === OTHER) {
    let k = classAt(text, ++p);
    while (k === OTHER) k = classAt(text, ++p);
    if (k < 0) return -1;
    for (let c = text.charCodeAt(p); c === 10 || c === 13 || c === 47; c = text.charCodeAt(++p));
    return p;
  }
  // Whitespace (first is SPACE or NEWLINE here). 5: up to the run's last \r or \n; 6: the run, less
  // its last character when something follows it; 7: the one character.
  let r = start;
  let lastNewline = -1;
  for (;;) {
    const k = classAt(text, r);
    if (k === NEWLINE) lastNewline = r;
    else if (k !== SPACE) {
      if (k < 0) return -1;
      break;
    }
    r++;
  }
  if (lastNewline >= 0) return lastNewline + 1;
  if (r === text.length) return r;
  return r - start >= 2 ? r - 1 : start + 1;
}
