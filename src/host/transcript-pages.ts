import { fieldError } from "../contract/errors.js";
import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { TranscriptStore } from "../store/types.js";
import { decodePageToken, encodePageToken, HOST_PAGE_KEY, pageSize, type PageKey } from "./page-token.js";

/** Whose tokens these are (page-token.ts): the caller's key and the RPC that issues them. */
export interface TranscriptPaging {
  key: PageKey;
  rpc: string;
}

/** HostService.ReadTranscript's paging: a host token lives for one engine call; the session binds the token. */
const HOST_PAGING: TranscriptPaging = { key: HOST_PAGE_KEY, rpc: "HostService.ReadTranscript" };

/**
 * One page of a session's whole history, oldest first (SessionService.GetTranscript and
 * HostService.ReadTranscript). The page token carries the last seq served, sealed for this caller,
 * this RPC and this session: a token of one session does not page another. One extra entry is read
 * to know whether another page follows.
 */
export async function readTranscriptPage(
  store: TranscriptStore,
  sessionId: string,
  requestedSize: number,
  pageToken: string,
  paging: TranscriptPaging = HOST_PAGING,
): Promise<{ entries: TranscriptEntry[]; nextPageToken: string }> {
  const limit = pageSize(requestedSize, 500, 5000);
  const purpose = `${paging.rpc}\u0000${sessionId}`;
  const position = decodePageToken(paging.key, purpose, pageToken);
  const afterSeq = position === undefined ? 0 : Number(position);
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) throw fieldError("page_token", "is not a token this server issued");
  const entries = await store.readEntries(sessionId, afterSeq, limit + 1);
  const more = entries.length > limit;
  const page = more ? entries.slice(0, limit) : entries;
  const last = page[page.length - 1];
  return { entries: page, nextPageToken: more && last ? encodePageToken(paging.key, purpose, String(last.seq)) : "" };
}
