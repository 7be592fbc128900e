import type * as Q from "../contract/gen/contextd/v1/search.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { Router } from "../registry/router.js";
import type { RuntimeAccess } from "./runtime-access.js";
import type { ActiveTotals, TranscriptStore } from "../store/types.js";
import { contextOverview } from "./active-view.js";
import { decodePageToken, encodePageToken, pageSize } from "./page-token.js";
import { readTranscriptPage } from "./transcript-pages.js";
import { expandCompaction, searchTranscript } from "./transcript-search.js";
import { sessionNotFound, type AdmittedSession } from "./session-visibility.js";
import type { SessionHost } from "./session-host.js";
import { AgentQuotas } from "./agent-quotas.js";

const LIST_PURPOSE = "SessionService.ListSessions";

/** Read-side SessionService calls: session info, listings, the whole transcript, deletion. */
export class SessionQueries {
  constructor(
    private readonly host: SessionHost,
    private readonly store: TranscriptStore,
    private readonly router: Router,
    private readonly quotas: AgentQuotas = new AgentQuotas(store),
  ) {}

  /** The session, and its agent's usage against its quotas (agent-quotas.ts). */
  async getSession(session: AdmittedSession): Promise<S.GetSessionResponse> {
    const totals = await this.store.readActiveTotals(session.sessionId);
    if (!totals) throw sessionNotFound(session.sessionId);
    return { info: this.info(totals), agentUsage: await this.quotas.usage(totals.session.agentId) };
  }

  /**
   * Only the sessions of agents the caller's credentials cover — filtered by the store's query, so
   * the cursor in the next page token is always the last session of this page: one the caller was
   * shown. The token is sealed for this caller (page-token.ts).
   */
  async listSessions(req: S.ListSessionsRequest, access: RuntimeAccess): Promise<S.ListSessionsResponse> {
    const limit = pageSize(req.pageSize, 100, 1000);
    const cursor = decodePageToken(access.pageKey, LIST_PURPOSE, req.pageToken);
    const page = await this.store.listSessions(limit, cursor, access.agents);
    const sessions: S.SessionInfo[] = [];
    for (const record of page.sessions) {
      if (!access.mayActFor(record.agentId)) continue; // the store filtered already; kept as a second lock
      const totals = await this.store.readActiveTotals(record.sessionId);
      if (totals) sessions.push(this.info(totals));
    }
    return { sessions, nextPageToken: page.nextCursor ? encodePageToken(access.pageKey, LIST_PURPOSE, page.nextCursor) : "" };
  }

  async getTranscript(req: S.GetTranscriptRequest, access: RuntimeAccess, session: AdmittedSession): Promise<S.GetTranscriptResponse> {
    await this.host.requireExists(session);
    return readTranscriptPage(this.store, session.sessionId, req.pageSize, req.pageToken, { key: access.pageKey, rpc: "SessionService.GetTranscript" });
  }

  /** History search (transcript-search.ts): the session's, or — AGENT scope — its stored agent's sessions. */
  async searchTranscript(req: Q.SearchTranscriptRequest, access: RuntimeAccess, session: AdmittedSession): Promise<Q.SearchTranscriptResponse> {
    await this.host.requireExists(session);
    return searchTranscript(this.store, req, session, { key: access.pageKey, rpc: "SessionService.SearchTranscript" });
  }

  async expandCompaction(req: Q.ExpandCompactionRequest, access: RuntimeAccess, session: AdmittedSession): Promise<Q.ExpandCompactionResponse> {
    await this.host.requireExists(session);
    return expandCompaction(this.store, req, session.sessionId, { key: access.pageKey, rpc: "SessionService.ExpandCompaction" });
  }

  async deleteSession(session: AdmittedSession): Promise<S.DeleteSessionResponse> {
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
      lastMessageKey: s.lastMessageKey,
      lastMessageTimestampMs: s.lastMessageTimestampMs,
      storedBytes: s.storedBytes,
    };
  }
}
