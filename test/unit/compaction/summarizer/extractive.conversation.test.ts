import { describe, expect, it } from "vitest";
import type { Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { MessageClock, dateOfTimestamp, formatDate, parseDate, resolveRelative } from "../../../../src/compaction/summarizer/extract-dates.js";
import { factsOf } from "../../../../src/compaction/summarizer/extract-facts.js";
import { SpeakerNames, isFiller, stripEmoji, stripOpeners } from "../../../../src/compaction/summarizer/extract-filler.js";
import { parseSummary } from "../../../../src/compaction/summarizer/extract-format.js";
import { summarizeExtractive } from "../../../../src/compaction/summarizer/extractive.js";
import { assistant, toolCall, toolResult, user } from "../../../fixtures/messages.js";

const MAY_8 = new Date(Date.UTC(2023, 4, 8));

function section(summary: string, heading: string): string[] {
  const lines = summary.split("\n");
  const start = lines.indexOf(`## ${heading}`);
  if (start < 0) return [];
  const out: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("## ")) break;
    if (line.trim()) out.push(line);
  }
  return out;
}

const names = (...n: string[]): SpeakerNames => {
  const s = new SpeakerNames();
  for (const x of n) s.add(x);
  return s;
};

describe("relative dates", () => {
  it("parses the session dates transcripts carry", () => {
    expect(formatDate(parseDate("1:56 pm on 8 May, 2023")!)).toBe("8 May 2023");
    expect(formatDate(parseDate("May 8th, 2023")!)).toBe("8 May 2023");
    expect(formatDate(parseDate("2023-05-08")!)).toBe("8 May 2023");
    expect(parseDate("no date here")).toBeUndefined();
  });

  it("resolves each phrase against the date, keeping the words as written", () => {
    const cases: Array<[string, string]> = [
      ["I went there yesterday.", "I went there yesterday (7 May 2023)."],
      ["Last night was fun", "Last night (7 May 2023) was fun"],
      ["We leave tomorrow", "We leave tomorrow (9 May 2023)"],
      ["I ran a race last Saturday", "I ran a race last Saturday (the Saturday before 8 May 2023)"],
      ["a poetry reading last Fri", "a poetry reading last Fri (the Friday before 8 May 2023)"],
      ["my school event last week", "my school event last week (the week before 8 May 2023)"],
      ["this past weekend was insane", "this past weekend (the weekend before 8 May 2023) was insane"],
      ["camping next month", "camping next month (June 2023)"],
      ["a conference this month", "a conference this month (May 2023)"],
      ["I got hurt last month", "I got hurt last month (April 2023)"],
      ["painted last year", "painted last year (2022)"],
      ["a conference two days ago", "a conference two days ago (6 May 2023)"],
      ["camping two weekends ago", "camping two weekends ago (two weekends before 8 May 2023)"],
      ["a few weeks ago", "a few weeks ago (a few weeks before 8 May 2023)"],
      ["ten years ago", "ten years ago (2013)"],
      ["three months ago", "three months ago (February 2023)"],
      ["see you next week", "see you next week (the week after 8 May 2023)"],
      ["last summer", "last summer (summer 2022)"],
      ["next summer", "next summer (summer 2023)"],
    ];
    for (const [input, want] of cases) expect(resolveRelative(input, MAY_8), input).toBe(want);
  });

  it("crosses month and year ends, and leaves text alone without a date or when already resolved", () => {
    expect(resolveRelative("yesterday", new Date(Date.UTC(2023, 0, 1)))).toBe("yesterday (31 December 2022)");
    expect(resolveRelative("next month", new Date(Date.UTC(2023, 11, 15)))).toBe("next month (January 2024)");
    expect(resolveRelative("yesterday", undefined)).toBe("yesterday");
    const once = resolveRelative("yesterday and last week", MAY_8);
    expect(resolveRelative(once, MAY_8)).toBe(once);
  });

  it("dates a message by its text first, then by an earlier text date, then by its timestamp", () => {
    const may1 = Date.UTC(2023, 4, 1, 15, 30);
    expect(formatDate(dateOfTimestamp(may1)!)).toBe("1 May 2023");
    expect(dateOfTimestamp(0)).toBeUndefined();

    const live = new MessageClock();
    expect(formatDate(live.dateOf("I moved yesterday.", may1)!)).toBe("1 May 2023");
    expect(live.dateOf("no timestamp", 0)).toBeUndefined();

    // A replayed transcript: the replay stamps "now", the text says when it was said.
    const replay = new MessageClock();
    const now = Date.UTC(2026, 11, 1);
    expect(formatDate(replay.dateOf("[1:56 pm on 8 May, 2023] Caroline: hi", now)!)).toBe("8 May 2023");
    expect(formatDate(replay.dateOf("a later turn without the bracket", now)!)).toBe("8 May 2023");
  });
});

describe("filler", () => {
  const mel = names("Caroline", "Melanie");

  it("recognises greetings, thanks, agreement and laughter, with names and short forms of them", () => {
    for (const s of [
      "Thanks, Mel!",
      "Hey Caroline! Good to see you!",
      "Sounds great, Mel!",
      "Totally agree, Mel.",
      "Haha, yeah! 😂",
      "Wow, that's so cool!",
      "Glad you had fun :)",
    ]) {
      expect(isFiller(s, mel), s).toBe(true);
    }
    for (const s of ["I ran a charity race", "Thanks for the 3 books", "We met Anna in Lisbon", "That charity race sounds great, Mel!"]) {
      expect(isFiller(s, mel), s).toBe(false);
    }
  });

  it("strips opening interjections, vocatives and emoji but not the content", () => {
    expect(stripOpeners("Wow, Mel, that's a lovely photo of Paris", mel)).toBe("That's a lovely photo of Paris");
    expect(stripOpeners("Yeah, I painted that lake sunrise last year!", mel)).toBe("I painted that lake sunrise last year!");
    expect(stripOpeners("Caroline went to Paris.", mel)).toBe("Caroline went to Paris.");
    expect(stripEmoji("We adopted a dog 🐶🎉 named Max!")).toBe("We adopted a dog named Max!");
  });
});

describe("fact extraction", () => {
  it("keeps who said what with the date, drops small talk and questions", () => {
    const n = names("Caroline", "Melanie");
    const facts = factsOf("[1:56 pm on 8 May, 2023] Melanie: Haha, thanks Caroline! Yeah, I painted that lake sunrise last year! How was the group?", n);
    expect(facts).toEqual(["[8 May 2023] Melanie: I painted that lake sunrise last year (2022)!"]);
  });

  it("names the role when the text names no speaker, and dates by the date it is given", () => {
    expect(factsOf("My sister Anna moved to Berlin last month.", names(), MAY_8, "User")).toEqual([
      "[8 May 2023] User: My sister Anna moved to Berlin last month (April 2023).",
    ]);
  });
});

/** LoCoMo-like sessions: `[time on date] Speaker: text`, the first speaker as the user. */
function session(date: string, turns: Array<[string, string]>): Message[] {
  return turns.map(([who, text]) => (who === "Caroline" ? user : assistant)(`[1:56 pm on ${date}] ${who}: ${text}`));
}

const SESSION_1 = session("8 May, 2023", [
  ["Caroline", "Hey Mel! Good to see you! How have you been?"],
  ["Melanie", "Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?"],
  ["Caroline", "I went to a LGBTQ support group yesterday and it was so powerful. Taking care of ourselves is so important."],
  ["Melanie", "Wow, that's cool, Caroline! That must have been amazing. I painted that lake sunrise last year!"],
  ["Caroline", "Thanks, Mel! 😊"],
]);

describe("a conversational session", () => {
  it("is a timeline by date: no 'important' sentences as goals, no greeting as the task, no filler", () => {
    const out = summarizeExtractive({ previousSummary: "", messages: SESSION_1, maxChars: 16_000 });
    expect(section(out, "Goals and constraints")).toEqual([]);
    expect(section(out, "Decisions")).toEqual([]);
    expect(section(out, "Earlier user requests")).toEqual([]);
    expect(section(out, "Facts")).toEqual([
      "On 8 May 2023:",
      "- Melanie: I'm swamped with the kids & work.",
      "- Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.",
      "- Melanie: I painted that lake sunrise last year (2022)!",
    ]);
    expect(out).not.toContain("Good to see you");
    // The newest turn stands as the latest message, verbatim; it is not repeated as a fact.
    expect(section(out, "Latest user request")).toEqual(["[1:56 pm on 8 May, 2023] Caroline: Thanks, Mel! 😊"]);
  });

  it("reads its own timeline back and merges the next session under its own date", () => {
    const first = summarizeExtractive({ previousSummary: "", messages: SESSION_1, maxChars: 16_000 });
    expect(parseSummary(first)!.facts).toEqual([
      "[8 May 2023] Melanie: I'm swamped with the kids & work.",
      "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.",
      "[8 May 2023] Melanie: I painted that lake sunrise last year (2022)!",
    ]);
    const second = summarizeExtractive({
      previousSummary: first,
      messages: session("25 May, 2023", [["Melanie", "I ran a charity race for mental health last Saturday."]]),
      maxChars: 16_000,
    });
    expect(section(second, "Facts")).toEqual([
      "On 8 May 2023:",
      "- Melanie: I'm swamped with the kids & work.",
      "- Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.",
      "- Melanie: I painted that lake sunrise last year (2022)!",
      "On 25 May 2023:",
      "- Melanie: I ran a charity race for mental health last Saturday (the Saturday before 25 May 2023).",
    ]);
    // Re-summarizing with nothing new changes nothing.
    expect(summarizeExtractive({ previousSummary: second, messages: [], maxChars: 16_000 })).toBe(second);
  });

  it("fits the cap, date headers included, keeping a header only over facts it still holds (budget)", () => {
    let summary = "";
    for (let day = 1; day <= 28; day++) {
      const messages = session(`${day} June, 2023`, [
        ["Caroline", `On day ${day} I visited Porto with Anna and bought ${day} books.`],
        ["Melanie", `We went camping at Yosemite with the kids for ${day} nights.`],
      ]);
      summary = summarizeExtractive({ previousSummary: summary, messages, maxChars: 1500 });
      expect(summary.length).toBeLessThanOrEqual(1500);
    }
    const facts = section(summary, "Facts");
    // Under pressure, whole days go; no header is left without a fact under it.
    facts.forEach((line, i) => {
      if (line.startsWith("On ")) expect(facts[i + 1]?.startsWith("- "), line).toBe(true);
    });
    expect(facts.filter((l) => l.startsWith("On ")).length).toBeLessThan(28);
    expect(facts.join("\n")).toContain("On day 1 I visited Porto");
    expect(facts.join("\n")).toContain("On day 28 I visited Porto");
    for (const cap of [0, 40, 300, 1200]) {
      expect(summarizeExtractive({ previousSummary: summary, messages: SESSION_1, maxChars: cap }).length).toBeLessThanOrEqual(cap);
    }
  });

  it("dates a plain chat by the messages' timestamps", () => {
    const at = { timestampMs: Date.UTC(2024, 2, 10, 9) };
    const out = summarizeExtractive({
      previousSummary: "",
      messages: [user("I adopted a cat named Luna yesterday.", at), assistant("Congratulations! Luna is a lovely name.", [], at)],
      maxChars: 16_000,
    });
    expect(section(out, "Facts")).toEqual(["On 10 March 2024:", "- User: I adopted a cat named Luna yesterday (9 March 2024)."]);
  });
});

describe("a mixed session", () => {
  it("keeps the coding sections and the chat's facts side by side", () => {
    const messages = [
      ...SESSION_1,
      user("Now fix the crash in src/billing/invoice.ts; never change renderInvoice's signature."),
      assistant("Running the tests.", [toolCall("c1", "bash", { command: "npx vitest run test/billing" })]),
      toolResult("c1", "bash", "TypeError: Cannot read properties of undefined (reading 'currency')", true),
    ];
    const out = summarizeExtractive({ previousSummary: "", messages, maxChars: 16_000 });
    expect(section(out, "Goals and constraints").join("\n")).toContain("never change renderInvoice's signature");
    expect(section(out, "Identifiers")).toContain("- file: src/billing/invoice.ts");
    expect(section(out, "Tool activity")).toEqual(["- bash: npx vitest run test/billing → failed"]);
    expect(section(out, "Facts").join("\n")).toContain("Caroline: I went to a LGBTQ support group yesterday (7 May 2023)");
    expect(section(out, "Latest user request")[0]).toContain("Now fix the crash");
  });
});
