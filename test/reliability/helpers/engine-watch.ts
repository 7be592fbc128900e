/**
 * Records a contextd's WatchEngines stream so that tests wait for registry events (quarantined,
 * released, health changed) instead of sleeping or polling.
 *
 *   const watch = await watchEngines(cd.address);
 *   const mark = watch.mark();
 *   ... // something that quarantines "x"
 *   const q = await watch.next(mark, "QUARANTINED", "x");
 *   watch.close();
 */
import { credentials, Metadata, type ClientReadableStream } from "@grpc/grpc-js";
import { EngineEventType, RegistryServiceClient, type EngineEvent, type WatchEnginesResponse } from "../../../src/contract/gen/contextd/v1/registry.js";

export type EventName = "REGISTERED" | "DEREGISTERED" | "HEALTH_CHANGED" | "QUARANTINED" | "RELEASED";

export interface EngineWatch {
  /** Everything seen so far, in order. */
  events(): EngineEvent[];
  /** A position: `next(mark, ...)` only considers events after it. */
  mark(): number;
  /** The first event of `type` for `engineId` after `mark` (already seen or future). */
  next(mark: number, type: EventName, engineId: string, timeoutMs?: number, pred?: (e: EngineEvent) => boolean): Promise<EngineEvent>;
  close(): void;
}

const TYPES: Record<EventName, EngineEventType> = {
  REGISTERED: EngineEventType.ENGINE_EVENT_TYPE_REGISTERED,
  DEREGISTERED: EngineEventType.ENGINE_EVENT_TYPE_DEREGISTERED,
  HEALTH_CHANGED: EngineEventType.ENGINE_EVENT_TYPE_HEALTH_CHANGED,
  QUARANTINED: EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED,
  RELEASED: EngineEventType.ENGINE_EVENT_TYPE_RELEASED,
};

/** Opens WatchEngines and resolves once the stream is established (its first message arrived). */
export async function watchEngines(address: string, token?: string): Promise<EngineWatch> {
  const client = new RegistryServiceClient(address, credentials.createInsecure());
  const seen: EngineEvent[] = [];
  const waiters = new Set<{ from: number; match: (e: EngineEvent) => boolean; resolve: (e: EngineEvent) => void }>();
  const md = new Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  // include_current: the first message proves the stream is live, so no event can be missed after.
  const stream: ClientReadableStream<WatchEnginesResponse> = client.watchEngines({ includeCurrent: true }, md);
  let streamError: Error | undefined;
  const live = new Promise<void>((resolve, reject) => {
    stream.once("data", () => resolve());
    stream.once("error", reject);
  });
  stream.on("data", (msg: WatchEnginesResponse) => {
    if (!msg.event) return;
    const index = seen.push(msg.event) - 1;
    for (const w of [...waiters]) {
      if (index >= w.from && w.match(msg.event)) {
        waiters.delete(w);
        w.resolve(msg.event);
      }
    }
  });
  stream.on("error", (err: Error & { code?: number }) => {
    if (err.code !== 1) streamError = err; // CANCELLED is our own close()
  });
  await live;

  return {
    events: () => [...seen],
    mark: () => seen.length,
    next(mark, type, engineId, timeoutMs = 15_000, pred = () => true) {
      const match = (e: EngineEvent) => e.type === TYPES[type] && e.engine?.engineId === engineId && pred(e);
      const found = seen.slice(mark).find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = {
          from: mark,
          match,
          resolve: (e: EngineEvent) => {
            clearTimeout(timer);
            resolve(e);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          const recent = seen.slice(mark).map((e) => `${EngineEventType[e.type]} ${e.engine?.engineId}: ${e.message}`);
          reject(
            new Error(
              `no ${type} event for "${engineId}" within ${timeoutMs} ms${streamError ? ` (stream failed: ${streamError.message})` : ""}; since the mark: ${JSON.stringify(recent)}`,
            ),
          );
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    close() {
      stream.cancel();
      client.close();
    },
  };
}
