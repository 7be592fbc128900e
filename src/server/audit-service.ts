import type { AuditServiceService, ListAuditEventsRequest, ListAuditEventsResponse } from "../contract/gen/contextd/v1/audit.js";
import { fieldError } from "../contract/errors.js";
import type { Row, ServiceTable } from "../contract/rpc-table.js";
import type { RegistryCaller, RegistryRule } from "../registry/registry-service.js";
import type { TranscriptStore } from "../store/types.js";

export type AuditTable = ServiceTable<typeof AuditServiceService, RegistryCaller, RegistryRule, "none">;

const PAGE_PREFIX = "audit:";

/**
 * AuditService's table (proto/contextd/v1/audit.proto): operators read the audit trail, newest
 * first, a page at a time. The page token is the last record's id: records are only ever added
 * with higher ids, so a page read while others are written neither repeats nor skips one.
 */
export function auditService(store: TranscriptStore): AuditTable {
  const listAuditEvents = async (req: ListAuditEventsRequest): Promise<ListAuditEventsResponse> => {
    if (req.actor.length > 256) throw fieldError("actor", "is longer than 256 characters");
    if (req.action.length > 64) throw fieldError("action", "is longer than 64 characters");
    if (req.sinceMs < 0) throw fieldError("since_ms", "must not be negative");
    if (req.untilMs < 0) throw fieldError("until_ms", "must not be negative");
    if (req.untilMs > 0 && req.sinceMs > req.untilMs) throw fieldError("since_ms", "is after until_ms");
    const limit = Math.min(req.pageSize || 100, 1000);
    const beforeId = pageCursor(req.pageToken);
    const rows = await store.listAudit({ sinceMs: req.sinceMs, untilMs: req.untilMs, actor: req.actor, action: req.action, beforeId, limit: limit + 1 });
    const events = rows.slice(0, limit);
    const more = rows.length > limit;
    return { events, nextPageToken: more ? `${PAGE_PREFIX}${events[events.length - 1].id}` : "" };
  };
  return {
    listAuditEvents: { auth: "operator", session: "none", deadline: "call", handler: listAuditEvents } as unknown as Row<
      ListAuditEventsRequest,
      ListAuditEventsResponse,
      RegistryCaller,
      RegistryRule,
      "none",
      false
    >,
  };
}

/** The id a page token continues before; 0 for the first page. */
function pageCursor(token: string): number {
  if (token === "") return 0;
  const id = token.startsWith(PAGE_PREFIX) ? Number(token.slice(PAGE_PREFIX.length)) : NaN;
  if (token.length > 64 || !Number.isSafeInteger(id) || id <= 0) throw fieldError("page_token", "is not a page token ListAuditEvents gave");
  return id;
}
