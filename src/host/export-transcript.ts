import { LimitExceededError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { JsonObject } from "../openclaw/json.js";
import { fromTranscriptEntry } from "../openclaw/session-entries.js";
import { SESSION_VERSION, serializeSessionFile } from "../openclaw/session-file.js";
import type { SessionRecord, TranscriptStore } from "../store/types.js";
import { sessionNotFound, type AdmittedSession } from "./session-visibility.js";

const PAGE = 1_000;

/**
 * SessionService.ExportTranscript (proto/contextd/v1/session.proto; docs/openclaw.md, "Session
 * files"): the session as an OpenClaw session JSONL file, every
 * entry of its history (hidden ones included) in order, mapped by src/openclaw/session-entries.ts.
 *
 * The header of an imported file is written back as it was — its `version` included, because
 * OpenClaw renders version 3 and 4 files differently for the model; a session begun in contextd
 * gets a version-4 header whose id is the session id. A file larger than the server may send in
 * one message is RESOURCE_EXHAUSTED naming the limit.
 */
export class TranscriptExports {
  constructor(
    private readonly store: TranscriptStore,
    private readonly maxResponseBytes: number,
  ) {}

  async exportTranscript(session: AdmittedSession): Promise<S.ExportTranscriptResponse> {
    const record = await this.store.getSession(session.sessionId);
    if (!record) throw sessionNotFound(session.sessionId);
    const entries: JsonObject[] = [];
    for (let after = 0; ;) {
      const page = await this.store.readEntries(session.sessionId, after, PAGE);
      for (const e of page) entries.push(fromTranscriptEntry(e));
      if (page.length < PAGE) break;
      after = page[page.length - 1].seq;
    }
    const jsonl = Buffer.from(serializeSessionFile(header(record), entries), "utf8");
    if (jsonl.length > this.maxResponseBytes) {
      throw new LimitExceededError(`the exported file is ${jsonl.length} bytes, over the server's maximum response size (${this.maxResponseBytes} bytes)`);
    }
    return { jsonl, entries: entries.length };
  }
}

function header(record: SessionRecord): JsonObject {
  if (record.headerJson) return JSON.parse(record.headerJson) as JsonObject;
  return { type: "session", version: SESSION_VERSION, id: record.sessionId, timestamp: new Date(record.createdAtMs).toISOString(), cwd: "" };
}
