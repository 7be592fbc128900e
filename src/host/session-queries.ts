import { InvalidArgumentError, NotFoundError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { Router } from "../registry/router.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { ActiveTotals, TranscriptStore } from "../store/types.js";
import { contextOverview } from "./active-view.js";
import { decodePageToken, encodePageToken, pageSize } from "./page-token.js";
import { requireSession } from "./validate.js";
import type { SessionHost } from "./session-host.js";

/** Read-side SessionService calls: session info, listings, the whole transcript, deletion. */
export class SessionQueries {
  constructor(
    private readonly host: SessionHost,
    private readonly store: TranscriptStore,
    private readonly router: Router,
  ) {}

  async getSession(req: S.GetSessionRequest): Promise<S.GetSessionResponse> {
    const session = requireSession(req.session);
    const totals = await this.store.readActiveTotals(session.sessionId);
    if (!totals) throw new NotFoundError(`session "${session.sessionId}" not found`);
    return { info: this.info(totals) };
  }

  /** Only the sessions of agents the caller's credentials cover. */
  async listSessions(req: S.ListSessionsRequest, access: RuntimeAccess): Promise<S.ListSessionsResponse> {
    const limit = pageSize(req.pageSize, 100, 1000);
    const cursor = decodePageToken(req.pageToken);
    const page = await this.store.listSessions(limit, cursor);
    const sessions: S.SessionInfo[] = [];
    for (const record of page.sessions) {
      if (!access.mayActFor(record.agentId)) continue;
      const totals = await this.store.readActiveTotals(record.sessionId);
      if (totals) sessions.push(this.info(totals));
    }
    return { sessions, nextPageToken: page.nextCursor ? encodePageToken(page.nextCursor) : "" };
  }

  async getTranscript(req: S.GetTranscriptRequest): Promise<S.GetTranscriptResponse> {
    const session = requireSession(req.session);
    await this.host.requireExists(session);
    const limit = pageSize(req.pageSize, 500, 5000);
    const position = decodePageToken(req.pageToken);
    const afterSeq = position === undefined ? 0 : Number(position);
    if (!Number.isInteger(afterSeq) || afterSeq < 0) throw new InvalidArgumentError("page_token is not a token this server issued");
    const entries = await this.store.readEntries(session.sessionId, afterSeq, limit + 1);
    const more = entries.length > limit;
    const page = more ? entries.slice(0, limit) : entries;
    const last = page[page.length - 1];
    return { entries: page, nextPageToken: more && last ? encodePageToken(String(last.seq)) : "" };
  }

  async deleteSession(req: S.DeleteSessionRequest): Promise<S.DeleteSessionResponse> {
    const session = requireSession(req.session);
    await this.host.requireExists(session);
    return { deleted: await this.store.deleteSession(session.sessionId) };
  }

  private info(totals: ActiveTotals): S.SessionInfo {
    const s = totals.session;
    const ref = { sessionId: s.sessionId, sessionKey: s.sessionKey, agentId: s.agentId };
    return {
      session: ref,
      createdAtMs: s.createdAtMs,
      updatedAtMs: s.updatedAtMs,
      entryCount: s.entryCount,
      messageCount: s.messageCount,
      compactionCount: s.compactionCount,
      totalTokens: s.totalTokens,
      activeTokens: totals.tokens,
      selectedEngineId: this.router.select(ref).selectedId,
      overview: contextOverview(totals),
      parentSessionId: s.parentSessionId,
    };
  }
}
