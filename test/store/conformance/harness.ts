import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, beforeEach, vi } from "vitest";

import { CompactionEntry, Role, type Message, type TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import { openStore, type ContextdStore } from "../../../src/store/open-store.js";
import type { NewMessage, SessionLabels } from "../../../src/store/types.js";
import { createScratchDatabase } from "../../helpers/scratch-postgres.js";

/**
 * Where the conformance suite runs: a fresh, empty store location per test (a temp SQLite file, a
 * scratch PostgreSQL database), on which any number of stores may be opened — several stores on
 * one location are several connections (or pools: replicas) on the same data.
 */
export interface StoreFactory {
  kind: "sqlite" | "postgres";
  createPlace(): Promise<StorePlace>;
}

export interface StorePlace {
  /** The store URL of this location. */
  url: string;
  destroy(): Promise<void>;
}

export const sqliteFactory: StoreFactory = {
  kind: "sqlite",
  async createPlace() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-store-"));
    return { url: `sqlite:${path.join(dir, "contextd.db")}`, destroy: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  },
};

export const postgresFactory: StoreFactory = {
  kind: "postgres",
  async createPlace() {
    const db = await createScratchDatabase();
    return { url: db.url(), destroy: () => db.drop() };
  },
};

/** Per-test state of a conformance file: a fresh place before each test, every store closed after it. */
export interface Stores {
  readonly kind: StoreFactory["kind"];
  /** Opens a store (another connection) on this test's place. */
  open(): Promise<ContextdStore>;
  /** A second, empty place in the same test (copy targets), destroyed with the first. */
  otherPlace(): Promise<StorePlace>;
  openAt(url: string): Promise<ContextdStore>;
}

export function useStores(factory: StoreFactory): Stores {
  let place: StorePlace | undefined;
  const places: StorePlace[] = [];
  const open: ContextdStore[] = [];
  beforeEach(async () => {
    place = await factory.createPlace();
    places.push(place);
  });
  afterEach(async () => {
    vi.useRealTimers();
    for (const s of open.splice(0)) await s.close();
    for (const p of places.splice(0)) await p.destroy();
  });
  const openAt = async (url: string) => {
    const s = await openStore(url);
    open.push(s);
    return s;
  };
  return {
    kind: factory.kind,
    open: () => openAt(place!.url),
    openAt,
    async otherPlace() {
      const p = await factory.createPlace();
      places.push(p);
      return p;
    },
  };
}

export const LABELS: SessionLabels = { sessionKey: "key-1", agentId: "agent-a" };

export function msg(text: string, tokens: number, role = Role.ROLE_USER, extra: Partial<Message> = {}): NewMessage {
  return { message: textMessage(role, text, extra), tokenCount: tokens };
}

export function compaction(summary: string, firstKeptEntryId: string): CompactionEntry {
  return CompactionEntry.fromPartial({ summary, firstKeptEntryId, tokensBefore: 1000, tokensAfter: 100, engineId: "legacy" });
}

export function texts(entries: { message: Message }[]): string[] {
  return entries.map((e) => (e.message.content[0].block?.$case === "text" ? e.message.content[0].block.value.text : "?"));
}

export function messageOf(e: TranscriptEntry): Message {
  if (e.entry?.$case !== "message") throw new Error(`entry ${e.id} is not a message`);
  return e.entry.value;
}

/** `n` messages m<from>…, alternating user/assistant, with 10 + i tokens each. */
export async function appendN(store: ContextdStore, sessionId: string, n: number, from = 1): Promise<TranscriptEntry[]> {
  const batch = Array.from({ length: n }, (_, i) => msg(`m${from + i}`, 10 + from + i, i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER));
  return store.appendMessages(sessionId, batch, LABELS);
}
