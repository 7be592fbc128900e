import type { ActiveView, ViewMessage } from "../types.js";

/**
 * The decoded active views of recently assembled sessions, so that an Assemble decodes only the
 * entries appended since the last one instead of the whole view (reading and decoding the view was
 * ~22 % of contextd's busy time on the sidecar path, issue 14).
 *
 * When a cached view is still right (SqliteStore.readActiveView checks, on every read):
 * - Appends only add entries after the session's `last_seq`; the view is extended with those.
 * - A compaction moves `latest_compaction_seq` and `active_from_seq`: a different key, read anew.
 * - Every other write of this connection that can change stored entries (rewrites, deletes,
 *   imports, seeded sessions, raw copies, subagent ends) clears the whole cache (`clear`): they are
 *   rare, and a delete followed by a re-creation could repeat a session's key exactly.
 * - Writes of any other connection to the file (another process, another SqliteStore) move SQLite's
 *   `PRAGMA data_version`, which clears the cache too.
 *
 * Cached messages are shared between reads, so they are frozen (stored messages already are, to
 * keep their remembered bytes right; see encoded-messages.ts), and every read gets its own arrays.
 * The cache is bounded by the stored bytes it holds (the decoded messages are about as large again);
 * the least recently read sessions go first.
 */
export interface CachedView {
  /** The session row's fields a cached view is valid for (besides last_seq, which it is extended to). */
  createdAtMs: number;
  latestCompactionSeq: number;
  activeFromSeq: number;
  lastSeq: number;
  compaction?: ActiveView["compaction"];
  pinned: readonly ViewMessage[];
  kept: ViewMessage[];
  /** Summary tokens plus every message's. */
  tokens: number;
  /** Stored bytes of the entries held (what the bound counts). */
  bytes: number;
}

/** Default bound: a few MB of stored entries (hundreds of typical views), well inside the memory bench's margin. */
export const VIEW_CACHE_BYTES = 4 * 1024 * 1024;

export class ViewCache {
  private readonly views = new Map<string, CachedView>();
  private bytes = 0;
  /** SQLite's data_version when the cache was last checked: another connection's commit changes it. */
  private dataVersion: number | undefined;

  constructor(private readonly maxBytes = VIEW_CACHE_BYTES) {}

  /** Clears the cache when `dataVersion` (PRAGMA data_version, read in the same transaction) moved. */
  checkDataVersion(dataVersion: number): void {
    if (this.dataVersion !== dataVersion) this.clear();
    this.dataVersion = dataVersion;
  }

  /** The cached view, now the most recently read. */
  get(sessionId: string): CachedView | undefined {
    const view = this.views.get(sessionId);
    if (view) {
      // Most recently read last: Map iteration order is the eviction order.
      this.views.delete(sessionId);
      this.views.set(sessionId, view);
    }
    return view;
  }

  set(sessionId: string, view: CachedView): void {
    this.delete(sessionId);
    if (view.bytes > this.maxBytes) return;
    this.views.set(sessionId, view);
    this.bytes += view.bytes;
    for (const [id, old] of this.views) {
      if (this.bytes <= this.maxBytes) break;
      this.views.delete(id);
      this.bytes -= old.bytes;
    }
  }

  private delete(sessionId: string): void {
    const old = this.views.get(sessionId);
    if (!old) return;
    this.views.delete(sessionId);
    this.bytes -= old.bytes;
  }

  clear(): void {
    this.views.clear();
    this.bytes = 0;
  }

  get size(): number {
    return this.views.size;
  }
}
