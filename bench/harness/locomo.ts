/**
 * LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0) for the compaction_quality scenario. The data
 * is read at run time from the file `BENCH_LOCOMO` names and never copied into the repository;
 * only aggregate scores leave this module.
 *
 * Replay: each dialogue turn becomes one message — the first speaker (`speaker_a`) as the user,
 * the second as the assistant — whose text is `[<session date>] <speaker>: <text>` (plus
 * `[shares a photo: <caption>]` when the turn carried an image), session by session.
 */
import fs from "node:fs";
import path from "node:path";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { REPO_ROOT } from "./processes.js";

/** The LoCoMo file (`locomo10.json`), which `BENCH_LOCOMO` names. */
export function locomoPath(): string {
  return process.env.BENCH_LOCOMO || path.resolve(REPO_ROOT, "../shared/data/locomo/locomo10.json");
}

interface RawTurn {
  speaker: string;
  dia_id: string;
  text: string;
  blip_caption?: string;
}
interface RawQa {
  question: string;
  answer?: string | number;
  evidence?: string[];
  category: number;
}
interface RawSample {
  sample_id: string;
  conversation: Record<string, unknown> & { speaker_a: string; speaker_b: string };
  qa: RawQa[];
}

export interface Question {
  /** The question as asked: what a runtime would pass as the prompt (never the answer or evidence). */
  question: string;
  answer: string;
  /** Normalized answer (see {@link normalize}); never empty. */
  normalized: string;
  category: number;
  /** Normalized text of the evidence turns that exist in the conversation. */
  evidence: string[];
}

export interface Conversation {
  id: string;
  /** Messages per LoCoMo session, in order. */
  sessions: Message[][];
  questions: Question[];
}

function turnMessage(turn: RawTurn, date: string, speakerA: string, ts: number): Message {
  const caption = turn.blip_caption ? ` [shares a photo: ${turn.blip_caption}]` : "";
  const role = turn.speaker === speakerA ? Role.ROLE_USER : Role.ROLE_ASSISTANT;
  return textMessage(role, `[${date}] ${turn.speaker}: ${turn.text}${caption}`, { timestampMs: ts });
}

/**
 * SQuAD-style normalization: lowercase, punctuation and symbols removed, the articles a/an/the
 * removed, whitespace collapsed.
 */
export function normalize(text: string): string {
  return text
    .toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, "")
    .replace(/\b(a|an|the)\b/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** Whether the normalized `needle` occurs in the normalized `haystack` as whole words. */
export function containsWords(haystack: string, needle: string): boolean {
  return ` ${haystack} `.includes(` ${needle} `);
}

/** Loads the conversations (category-5 questions, which have no answer in the conversation, left out). */
export function loadLocomo(file = locomoPath()): Conversation[] {
  const raw = JSON.parse(fs.readFileSync(file, "utf8")) as RawSample[];
  return raw.map((sample) => {
    const c = sample.conversation;
    const keys = Object.keys(c)
      .filter((k) => /^session_\d+$/.test(k) && Array.isArray(c[k]))
      .sort((a, b) => Number(a.slice(8)) - Number(b.slice(8)));
    const byDia = new Map<string, string>();
    let ts = Date.UTC(2023, 0, 1);
    const sessions = keys.map((k) => {
      const date = String(c[`${k}_date_time`] ?? "");
      return (c[k] as RawTurn[]).map((turn) => {
        byDia.set(turn.dia_id, normalize(turn.text));
        return turnMessage(turn, date, c.speaker_a, (ts += 60_000));
      });
    });
    const questions: Question[] = [];
    for (const q of sample.qa) {
      if (q.category === 5 || q.answer === undefined || q.answer === null) continue;
      const normalized = normalize(String(q.answer));
      if (!normalized) continue;
      const ids = (q.evidence ?? []).flatMap((e) => e.split(/[;\s]+/)).filter((e) => /^D\d+:\d+$/.test(e));
      const evidence = ids.map((id) => byDia.get(id)).filter((t): t is string => t !== undefined && t.length > 0);
      questions.push({ question: q.question, answer: String(q.answer), normalized, category: q.category, evidence });
    }
    return { id: sample.sample_id, sessions, questions };
  });
}

export interface Survival {
  /** Share of questions whose normalized answer occurs in the context. */
  answers: number;
  /** Share of questions (with evidence) whose every evidence turn occurs verbatim (normalized) in the context. */
  evidence: number;
  questions: number;
}

/** Scores one assembled context (its text, already normalized) against a conversation's questions. */
export function score(contextNormalized: string, questions: Question[]): { answers: number; evidence: number; withEvidence: number } {
  let answers = 0;
  let evidence = 0;
  let withEvidence = 0;
  for (const q of questions) {
    if (containsWords(contextNormalized, q.normalized)) answers++;
    if (q.evidence.length) {
      withEvidence++;
      if (q.evidence.every((e) => containsWords(contextNormalized, e))) evidence++;
    }
  }
  return { answers, evidence, withEvidence };
}
