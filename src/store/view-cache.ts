import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { CALL_PATH_SLICE_MS, TimeSlices } from "../contract/time-slices.js";
import { decodeEntry, toSessionRecord, toViewMessage, type PayloadRow, type SessionRow } from "./rows.js";
import type { ActiveView, ViewMessage } from "./types.js";

/**
 * The decoded active views of recently assembled sessions, so that an Assemble decodes only the
 * entries appended since the last one instead of the whole view (reading and decoding the view was
 * ~22 % of contextd's busy time on the sidecar path). Both stores keep one
 * (sqlite/active-view-read.ts, postgres/active-view-read.ts); what they share is here.
 *
 * A cached view is checked against the session row on every read, in the same snapshot as the
 * entries it is extended with (`holds`):
 * - Appends only add entries after the session's `last_seq`; the view is extended with those.
 * - A compaction moves `latest_compaction_seq` and `active_from_seq`: read anew.
 * - Every other change to stored entries (rewrites, deletes, imports, seeded sessions, raw copies)
 *   moves the `revision`: on PostgreSQL the row's `view_revision`, which the database itself moves
 *   on any UPDATE or DELETE of a session's entries (a trigger, migration 4) and draws from one
 *   sequence for every new row, so a session deleted and created again never repeats one, whichever
 *   replica wrote it. SQLite, one process per file, keeps revision 0 and instead clears the cache on
 *   its own such writes, and whenever `PRAGMA data_version` says another connection committed.
 *
 * Decoding gives the event loop back every CALL_PATH_SLICE_MS (time-slices.ts): a view of
 * thousands of entries that is not cached decodes in slices, so another tenant's small Assemble is
 * not queued behind it. A view decoded while a write cleared the cache is answered but not cached
 * (`generation`).
 *
 * Cached messages are shared between reads, so they are frozen (stored messages already are, to
 * keep their remembered bytes right; see encoded-messages.ts), and every read gets its own arrays.
 * The cache is bounded by the stored bytes it holds (the decoded messages are about as large again).
 * It is shared by every tenant, so eviction is fair between agents: when the bound is passed, the
 * least recently read view of the agent holding the most bytes goes first. One agent assembling
 * more sessions than the cache holds then cycles through its own share instead of evicting every
 * other agent's view (which made a quiet agent beside it decode its whole view on each Assemble).
 */
export interface CachedView {
  /** The session's agent: the cache's share eviction is fair between. */
  agentId: string;
  /** The session row's fields a cached view is valid for (besides last_seq, which it is extended to). */
  createdAtMs: number;
  latestCompactionSeq: number;
  activeFromSeq: number;
  revision: number;
  lastSeq: number;
  compaction?: ActiveView["compaction"];
  pinned: readonly ViewMessage[];
  kept: ViewMessage[];
  /** Summary tokens plus every message's. */
  tokens: number;
  /** Stored bytes of the entries held (what the bound counts). */
  bytes: number;
}

/** A session row as the cache reads it: PostgreSQL's has a `view_revision`, SQLite's none (0). */
export type ViewRow = SessionRow & { view_revision?: number };

/**
 * Default bound: 2 MB of stored entries — a few dozen 15k-token views, hundreds of short ones. The
 * decoded messages take several times their stored bytes of heap: at 4 MB the cache cost the memory
 * bench ~14 MB of peak RSS (217 against 204 MB).
 */
export const VIEW_CACHE_BYTES = 2 * 1024 * 1024;

/**
 * What a view counts against the bound at least. It bounds how many views (and so agents) the cache
 * holds — at most 512 at the default bound — which bounds the eviction's scan over agents; a decoded
 * view of a few short messages takes a few KiB of heap anyway.
 */
const MIN_VIEW_CHARGE = 4096;

function charge(view: CachedView): number {
  return Math.max(view.bytes, MIN_VIEW_CHARGE);
}

/** One agent's cached views, least recently read first (Map iteration order), and their bytes. */
interface AgentShare {
  views: Map<string, CachedView>;
  bytes: number;
}

export class ViewCache {
  private readonly views = new Map<string, CachedView>();
  private readonly shares = new Map<string, AgentShare>();
  private bytes = 0;
  /** SQLite's data_version when the cache was last checked: another connection's commit changes it. */
  private dataVersion: number | undefined;
  private cleared = 0;

  constructor(private readonly maxBytes = VIEW_CACHE_BYTES) {}

  /** Clears the cache when `dataVersion` (PRAGMA data_version, read in the same transaction) moved. */
  checkDataVersion(dataVersion: number): void {
    if (this.dataVersion !== dataVersion) this.clear();
    this.dataVersion = dataVersion;
  }

  /** The cached view, now its agent's most recently read. */
  get(sessionId: string): CachedView | undefined {
    const view = this.views.get(sessionId);
    if (view) {
      const share = this.shares.get(view.agentId)!.views;
      share.delete(sessionId);
      share.set(sessionId, view);
    }
    return view;
  }

  /**
   * Moves on every clear: a view read before a clear and decoded after it (decoding yields to the
   * event loop) may hold what the clearing write changed, so it is not cached (`set`'s `generation`).
   */
  get generation(): number {
    return this.cleared;
  }

  /**
   * Caches `view` unless it is larger than the bound alone (a bound of 0 caches nothing) or was read
   * before the cache was last cleared (`generation`, when given, is the one it was read at).
   */
  set(sessionId: string, view: CachedView, generation = this.cleared): void {
    if (generation !== this.cleared) return;
    this.delete(sessionId);
    if (charge(view) > this.maxBytes) return;
    let share = this.shares.get(view.agentId);
    if (!share) this.shares.set(view.agentId, (share = { views: new Map(), bytes: 0 }));
    share.views.set(sessionId, view);
    share.bytes += charge(view);
    this.views.set(sessionId, view);
    this.bytes += charge(view);
    while (this.bytes > this.maxBytes) this.evictFromLargestShare();
  }

  delete(sessionId: string): void {
    const old = this.views.get(sessionId);
    if (!old) return;
    this.views.delete(sessionId);
    this.bytes -= charge(old);
    const share = this.shares.get(old.agentId)!;
    share.views.delete(sessionId);
    share.bytes -= charge(old);
    if (share.views.size === 0) this.shares.delete(old.agentId);
  }

  clear(): void {
    this.cleared++;
    this.views.clear();
    this.shares.clear();
    this.bytes = 0;
  }

  get size(): number {
    return this.views.size;
  }

  /** The scan is over the agents with a cached view: at most maxBytes / MIN_VIEW_CHARGE of them. */
  private evictFromLargestShare(): void {
    let largest: AgentShare | undefined;
    for (const share of this.shares.values()) if (!largest || share.bytes > largest.bytes) largest = share;
    const [oldest] = largest!.views.keys();
    this.delete(oldest!);
  }
}

/** The cached view is this session's and nothing but appends changed its entries since. */
export function holds(view: CachedView, row: ViewRow): boolean {
  return (
    view.createdAtMs === row.created_at_ms &&
    view.latestCompactionSeq === row.latest_compaction_seq &&
    view.activeFromSeq === row.active_from_seq &&
    view.revision === (row.view_revision ?? 0) &&
    view.lastSeq <= row.last_seq
  );
}

/** Decoded view messages, frozen (a cached one is shared by every read of the session), in time slices. */
export async function decodeViewRows(rows: readonly PayloadRow[], slices: TimeSlices): Promise<{ messages: ViewMessage[]; tokens: number; bytes: number }> {
  let tokens = 0;
  let bytes = 0;
  const messages: ViewMessage[] = [];
  for (const r of rows) {
    if (slices.due()) await slices.yield();
    tokens += r.token_count;
    bytes += r.payload.length;
    const m = toViewMessage(r);
    Object.freeze(m.message);
    messages.push(Object.freeze(m));
  }
  return { messages, tokens, bytes };
}

/**
 * A whole view read at `row`: its latest compaction entry's stored payload (when the row names one),
 * the pinned messages, then the kept range.
 */
export async function wholeView(
  row: ViewRow,
  compactionPayload: Buffer | undefined,
  pinnedRows: readonly PayloadRow[],
  keptRows: readonly PayloadRow[],
): Promise<CachedView> {
  const slices = new TimeSlices(CALL_PATH_SLICE_MS);
  let tokens = 0;
  let bytes = 0;
  let compaction: { entry: TranscriptEntry; summaryTokens: number } | undefined;
  if (row.latest_compaction_seq > 0) {
    if (!compactionPayload) throw new Error(`session ${row.session_id}: compaction entry seq ${row.latest_compaction_seq} is missing`);
    compaction = Object.freeze({ entry: Object.freeze(decodeEntry(compactionPayload)), summaryTokens: row.active_summary_tokens });
    tokens += row.active_summary_tokens;
    bytes += compactionPayload.length;
  }
  const pinned = await decodeViewRows(pinnedRows, slices);
  const kept = await decodeViewRows(keptRows, slices);
  for (const part of [pinned, kept]) {
    tokens += part.tokens;
    bytes += part.bytes;
  }
  return {
    agentId: row.agent_id,
    createdAtMs: row.created_at_ms,
    latestCompactionSeq: row.latest_compaction_seq,
    activeFromSeq: row.active_from_seq,
    revision: row.view_revision ?? 0,
    lastSeq: row.last_seq,
    ...(compaction ? { compaction } : {}),
    pinned: pinned.messages,
    kept: kept.messages,
    tokens,
    bytes,
  };
}

/** The cached view with the messages appended after its last seq, up to `row` (pinned ones cannot change without a compaction). */
export async function extendView(view: CachedView, row: ViewRow, addedRows: readonly PayloadRow[]): Promise<CachedView> {
  const added = await decodeViewRows(addedRows, new TimeSlices(CALL_PATH_SLICE_MS));
  return { ...view, lastSeq: row.last_seq, kept: [...view.kept, ...added.messages], tokens: view.tokens + added.tokens, bytes: view.bytes + added.bytes };
}

/** What readActiveView answers: the row's session record and the view, in lists of the caller's own. */
export function toActiveView(row: ViewRow, view: CachedView): ActiveView {
  return {
    session: toSessionRecord(row),
    ...(view.compaction ? { compaction: view.compaction } : {}),
    messages: [...view.pinned, ...view.kept],
    pinnedCount: view.pinned.length,
    tokens: view.tokens,
  };
}
