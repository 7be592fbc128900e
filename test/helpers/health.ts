/**
 * grpc.health.v1 from tests without generated stubs: the request for service "" is the empty
 * message, and the answer's field 1 is the status (1 SERVING, 2 NOT_SERVING, 0 UNKNOWN).
 *
 *   expect(await healthCheck(address)).toBe("SERVING");
 *   const watch = healthWatch(address);
 *   await watch.next("NOT_SERVING");
 *   watch.close();
 *   const loop = healthLoop(address);        // Check after Check: how long the server kept it waiting
 *   ...; const latencies = await loop.stop();
 */
import { credentials, Client, type ClientReadableStream } from "@grpc/grpc-js";
import { performance } from "node:perf_hooks";

export type HealthStatus = "UNKNOWN" | "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";
const NAMES: HealthStatus[] = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];

const serialize = () => Buffer.alloc(0);
const deserialize = (b: Buffer): HealthStatus => (b.length >= 2 && b[0] === 0x08 ? (NAMES[b[1]!] ?? "UNKNOWN") : "UNKNOWN");

/** One Check of service "" (rejects with the gRPC error when the call fails). */
export function healthCheck(address: string, timeoutMs = 5_000): Promise<HealthStatus> {
  const client = new Client(address, credentials.createInsecure());
  return new Promise<HealthStatus>((resolve, reject) => {
    client.makeUnaryRequest("/grpc.health.v1.Health/Check", serialize, deserialize, {}, { deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res!);
    });
  });
}

export interface HealthWatch {
  /** Every status received so far, in order. */
  seen: HealthStatus[];
  /** Resolves when a status equal to `status` arrives after the `from`-th one (default: any so far counts). */
  next(status: HealthStatus, from?: number, timeoutMs?: number): Promise<number>;
  /** Resolves when the server ends the stream (with its status code). */
  ended: Promise<{ code: number; details: string }>;
  close(): void;
}

/** A Watch stream of service "" on its own channel. */
export function healthWatch(address: string): HealthWatch {
  const client = new Client(address, credentials.createInsecure());
  const seen: HealthStatus[] = [];
  const waiters: Array<() => void> = [];
  const call: ClientReadableStream<HealthStatus> = client.makeServerStreamRequest("/grpc.health.v1.Health/Watch", serialize, deserialize, {});
  let finished = false;
  const ended = new Promise<{ code: number; details: string }>((resolve) => {
    call.on("status", (s: { code: number; details: string }) => {
      finished = true;
      for (const w of waiters.splice(0)) w();
      resolve({ code: s.code, details: s.details });
    });
  });
  call.on("data", (s: HealthStatus) => {
    seen.push(s);
    for (const w of waiters.splice(0)) w();
  });
  call.on("error", () => undefined);
  return {
    seen,
    ended,
    next(status, from = 0, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`health Watch on ${address}: no ${status} within ${timeoutMs} ms (seen ${seen.join(", ")})`)),
          timeoutMs,
        );
        const look = () => {
          const i = seen.findIndex((s, k) => k >= from && s === status);
          if (i >= 0) {
            clearTimeout(timer);
            resolve(i);
          } else if (finished) {
            clearTimeout(timer);
            reject(new Error(`health Watch on ${address} ended before ${status} (seen ${seen.join(", ")})`));
          } else waiters.push(look);
        };
        look();
      });
    },
    close() {
      call.cancel();
      client.close();
    },
  };
}

export interface HealthLoop {
  /** Latency of every check answered so far (ms). */
  latencies: number[];
  /** Resolves once `n` checks have been answered. */
  answered(n: number): Promise<void>;
  /** Stops after the check in flight and resolves with every latency, the one in flight included. */
  stop(): Promise<number[]>;
}

/** Check calls one after another on one channel (service "": the server as a whole). */
export function healthLoop(address: string): HealthLoop {
  const client = new Client(address, credentials.createInsecure());
  const latencies: number[] = [];
  const waiters: Array<() => void> = [];
  let running = true;
  const check = () =>
    new Promise<void>((resolve, reject) => {
      const started = performance.now();
      // The deadline is far above the bound so a stall shows as a long latency, not an error.
      const deadline = Date.now() + 60_000;
      client.makeUnaryRequest(
        "/grpc.health.v1.Health/Check",
        () => Buffer.alloc(0),
        (b: Buffer) => b,
        {},
        { deadline },
        (err) => {
          if (err) return reject(err);
          latencies.push(performance.now() - started);
          for (const w of waiters.splice(0)) w();
          resolve();
        },
      );
    });
  const done = (async () => {
    while (running) await check();
  })();
  return {
    latencies,
    answered: (n) =>
      new Promise((resolve) => {
        const look = () => (latencies.length >= n ? resolve() : waiters.push(look));
        look();
      }),
    stop: async () => {
      running = false;
      await done.finally(() => client.close());
      return latencies;
    },
  };
}
