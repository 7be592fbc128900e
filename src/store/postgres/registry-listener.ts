import pg from "pg";

import { REGISTRY_CHANNEL, type RegistryChange, type RegistryChangeKind, type RegistryWatch, type RegistryWatchOptions } from "../registry-store.js";
import type { ParsedPostgresUrl } from "./pool-config.js";

/** First wait before reconnecting a lost LISTEN connection; doubles up to the cap. */
const RECONNECT_BASE_MS = 100;
const RECONNECT_MAX_MS = 5_000;
/** How the listening connection shows in pg_stat_activity (the pool's are `contextd`). */
export const LISTENER_APPLICATION_NAME = "contextd registry listener";

const KINDS = new Set<RegistryChangeKind>(["registered", "deregistered", "quarantined", "released"]);

/**
 * PostgresStore.watchRegistry: LISTEN `contextd_registry` on a connection of its own — never a
 * pooled one, which would be handed to other callers and lose the subscription — and turn each
 * NOTIFY (registry-records.ts sends them) into a RegistryChange.
 *
 * A lost connection (pg_terminate_backend, a server restart, a network failure) is reconnected with
 * backoff (100 ms doubling to 5 s) for as long as the watch is open; every successful LISTEN —
 * the first one too — reports `resync`, because notifications sent while nobody listened are gone
 * for good. The registry's periodic reconcile (registry-sync.ts) covers whatever slips through
 * anyway, e.g. a connection that died without the socket noticing (TCP keepalive is on).
 */
export class RegistryListener implements RegistryWatch {
  readonly shared = true;
  private client: pg.Client | undefined;
  private generation = 0;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private backoffMs = RECONNECT_BASE_MS;
  private listening = false;

  constructor(
    private readonly parsed: ParsedPostgresUrl,
    private readonly onChange: (change: RegistryChange) => void,
    private readonly options: RegistryWatchOptions = {},
    private readonly onClosed: () => void = () => {},
  ) {
    void this.connect();
  }

  get connected(): boolean {
    return this.listening;
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const generation = ++this.generation;
    const client = new pg.Client({
      connectionString: this.parsed.connectionString,
      connectionTimeoutMillis: this.parsed.settings.connectTimeoutMs,
      keepAlive: true,
      fallback_application_name: LISTENER_APPLICATION_NAME,
    });
    this.client = client;
    const lost = (err?: Error) => this.lost(generation, client, err);
    // Without an 'error' listener a connection the server closes would crash the process.
    client.on("error", lost);
    client.on("end", () => lost());
    client.on("notification", (msg) => {
      if (generation === this.generation && msg.channel === REGISTRY_CHANNEL) this.onChange(parseChange(msg.payload));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${REGISTRY_CHANNEL}`);
    } catch (err) {
      lost(err as Error);
      return;
    }
    if (generation !== this.generation || this.closed) return;
    this.listening = true;
    this.backoffMs = RECONNECT_BASE_MS;
    this.options.onConnection?.({ connected: true });
    this.onChange({ kind: "resync" });
  }

  private lost(generation: number, client: pg.Client, err?: Error): void {
    if (generation !== this.generation) return; // an old connection's last events
    this.generation++;
    client.end().catch(() => undefined);
    const wasListening = this.listening;
    this.listening = false;
    if (this.closed) return;
    if (wasListening) this.options.onConnection?.({ connected: false, error: err ?? new Error("connection ended") });
    const wait = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, RECONNECT_MAX_MS);
    this.timer = setTimeout(() => void this.connect(), wait);
    this.timer.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClosed();
    this.generation++;
    this.listening = false;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}

/** A payload this build cannot read (another version's, say) asks for a full re-read. */
function parseChange(payload: string | undefined): RegistryChange {
  try {
    const p = JSON.parse(payload ?? "") as { engine_id?: unknown; change?: unknown };
    if (typeof p.engine_id === "string" && p.engine_id && KINDS.has(p.change as RegistryChangeKind)) {
      return { kind: p.change as RegistryChangeKind, engineId: p.engine_id };
    }
  } catch {
    // fall through
  }
  return { kind: "resync" };
}
