import { InvalidArgumentError } from "../contract/errors.js";
import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import type { TranscriptStore } from "../store/types.js";
import { decodePageToken, encodePageToken, pageSize } from "./page-token.js";

/**
 * One page of a session's whole history, oldest first (SessionService.GetTranscript and
 * HostService.ReadTranscript). The page token carries the last seq served; one extra entry is read
 * to know whether another page follows.
 */
export async function readTranscriptPage(
  store: TranscriptStore,
  sessionId: string,
  requestedSize: number,
  pageToken: string,
): Promise<{ entries: TranscriptEntry[]; nextPageToken: string }> {
  const limit = pageSize(requestedSize, 500, 5000);
  const position = decodePageToken(pageToken);
  const afterSeq = position === undefined ? 0 : Number(position);
  if (!Number.isInteger(afterSeq) || afterSeq < 0) throw new InvalidArgumentError("page_token is not a token this server issued");
  const entries = await store.readEntries(sessionId, afterSeq, limit + 1);
  const more = entries.length > limit;
  const page = more ? entries.slice(0, limit) : entries;
  const last = page[page.length - 1];
  return { entries: page, nextPageToken: more && last ? encodePageToken(String(last.seq)) : "" };
}
