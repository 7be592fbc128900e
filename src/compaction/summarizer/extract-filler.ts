/**
 * Filler in conversational text: greetings, thanks, laughter, emoji, agreement and small talk
 * that carries no fact. A summary of a chat has no room for "Thanks, Mel!" or "Sounds great!",
 * and a fact clause reads better without its "Wow, Mel, " opening — but the words that remain are
 * never changed: names and numbers stay verbatim.
 *
 * Names: the speakers' names and their short forms ("Mel" for Melanie, "Caro" for Caroline) are
 * vocatives when they address someone; {@link SpeakerNames} recognises them.
 */

/** Speakers' names (whole words) and what counts as a short form of one. */
export class SpeakerNames {
  private readonly names = new Set<string>();

  add(name: string): void {
    for (const w of name.split(/\s+/)) if (w) this.names.add(w);
  }

  /** `word` is a speaker's name or a short form of one (a prefix of at least 3 letters). */
  has(word: string): boolean {
    if (this.names.has(word)) return true;
    if (word.length < 3) return false;
    for (const n of this.names) if (n.length > word.length && n.startsWith(word)) return true;
    return false;
  }

  get size(): number {
    return this.names.size;
  }
}

/** Words of small talk: a clause made only of these (and names) says nothing worth keeping. */
const SMALL_TALK = new Set(
  (
    "hey hi hello hiya yo howdy bye goodbye later cheers thanks thank thx ty you so much very really truly too lot lots " +
    "great awesome amazing cool nice lovely wonderful fantastic fab brilliant sweet neat wow whoa omg oh ooh aww aw ah " +
    "haha hahaha hehe lol lmao yay woohoo yes yeah yep yup sure ok okay alright right true totally definitely absolutely " +
    "agree agreed exactly indeed sounds sound looks look seems like love that's thats it's its this that is was be been " +
    "what a an the and but or me my i i'm im we we're you're your it glad happy good to see hear great fun had blast " +
    "appreciate appreciated means mean kind words support supportive same here too always there for all of care take " +
    "soon catch up chat talk again know just feel feels feeling how have are doing going been well pleasure anytime " +
    "no problem worries np congrats congratulations proud stoked excited can't cant wait keep it up hang in"
  ).split(" "),
);

/** Interjections that may open a sentence before its content ("Wow, …", "Haha! …", "Hey Mel, …"). */
const OPENERS = new Set(
  "hey hi hello wow whoa oh ooh aww aw ah haha hahaha hehe lol omg yeah yes yep yup ok okay so well um hmm honestly totally gosh geez man dude".split(" "),
);

const EMOJI = /[\p{Extended_Pictographic}\u{1F1E6}-\u{1F1FF}\u{FE0F}\u{200D}]/gu;
/** Emoticons written with punctuation: ":)", ":-D", ";)", "<3", ":P". */
const EMOTICON = /(?:^|\s)(?:[:;=]-?[)(DPp/\\|]|<3|\^_\^|xD)(?=\s|$)/g;

/** `text` without emoji and emoticons, whitespace tidied. */
export function stripEmoji(text: string): string {
  return text
    .replace(EMOJI, "")
    .replace(EMOTICON, " ")
    .replace(/\s{2,}/g, " ")
    .replace(/\s+([,.!?])/g, "$1")
    .trim();
}

function bare(word: string): string {
  return word.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}']+$/gu, "").replace(/['’]s$/, "");
}

/**
 * `clause` without its opening interjections and vocatives: "Wow, Mel, that's a great photo" →
 * "that's a great photo"; "Haha! We went…" → "We went…". The rest is kept as written (its first
 * letter capitalised when an opener was removed).
 */
export function stripOpeners(clause: string, names: SpeakerNames): string {
  let rest = clause;
  for (let i = 0; i < 4; i++) {
    const m = /^([^\s,!.?]+)((?:\s+[^\s,!.?]+)?)\s*([,!.…]+|\s[-–—])\s+/u.exec(rest);
    if (!m) break;
    const first = bare(m[1]);
    const second = bare(m[2].trim());
    const opener = OPENERS.has(first.toLowerCase()) && (!second || names.has(second) || OPENERS.has(second.toLowerCase()));
    const vocative = names.has(first) && !second;
    if (!opener && !vocative) break;
    rest = rest.slice(m[0].length);
  }
  if (rest === clause || !rest) return clause;
  return rest[0].toUpperCase() + rest.slice(1);
}

/** Whether `clause` is small talk: nothing left once small-talk words, names and emoji are removed. */
export function isFiller(clause: string, names: SpeakerNames): boolean {
  const text = stripEmoji(clause);
  for (const raw of text.split(/\s+/)) {
    const w = bare(raw);
    if (!w) continue;
    if (/\d/.test(w)) return false;
    if (names.has(w)) continue;
    if (!SMALL_TALK.has(w.toLowerCase().replace(/’/g, "'"))) return false;
  }
  return true;
}
