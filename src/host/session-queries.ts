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
import type { SessionDeletions } from "./session-deletions.js";
import { soonestFirst, type RetentionPolicy } from "./retention.js";
import { fieldError } from "../contract/errors.js";
import { AgentQuotas } from "./agent-quotas.js";

const LIST_PURPOSE = "SessionService.ListSessions";
/** The furthest ahead the expiring listing looks: 100 years. */
const MAX_EXPIRING_WITHIN_MS = 100 * 365 * 86_400_000;

/** Read-side SessionService calls: session info, listings (the expiring one too), the whole transcript, deletion. */
export class SessionQueries {
  constructor(
    private readonly host: SessionHost,
    private readonly store: TranscriptStore,
    private readonly router: Router,
    private readonly deletions: SessionDeletions,
    private readonly retention: RetentionPolicy,
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
    if (req.expiringWithinMs > 0) return this.listExpiring(req, access, limit);
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

  /** ListSessions with `expiring_within_ms`: what the retention sweep deletes by then, soonest first, in one page. */
  private async listExpiring(req: S.ListSessionsRequest, access: RuntimeAccess, limit: number): Promise<S.ListSessionsResponse> {
    if (req.pageToken) throw fieldError("page_token", "must be empty with expiring_within_ms (the expiring listing is one page)");
    if (req.expiringWithinMs > MAX_EXPIRING_WITHIN_MS) throw fieldError("expiring_within_ms", `must be at most ${MAX_EXPIRING_WITHIN_MS} (100 years)`);
    const cutoff = Date.now() + req.expiringWithinMs;
    const lists = await Promise.all(this.retention.rules().map((rule) => this.store.listExpiringSessions(rule, cutoff, limit)));
    const sessions: S.SessionInfo[] = [];
    for (const s of soonestFirst(lists, limit)) {
      if (!access.mayActFor(s.agentId)) continue;
      const totals = await this.store.readActiveTotals(s.sessionId);
      if (totals) sessions.push(this.info(totals));
    }
    return { sessions, nextPageToken: "" };
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

  async deleteSession(req: S.DeleteSessionRequest, session: AdmittedSession): Promise<S.DeleteSessionResponse> {
    await this.host.requireExists(session);
    const deleted = await this.deletions.delete(session.sessionId, "deleted", { keepSubagents: req.keepSubagents });
    return { deleted: deleted !== undefined, deletedSubagents: Math.max(0, (deleted?.sessions.length ?? 0) - 1), forgetDeliveries: deleted?.deliveries ?? 0 };
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
      expiresAtMs: this.retention.expiresAtMs(s),
      storedBytes: s.storedBytes,
    };
  }
}
