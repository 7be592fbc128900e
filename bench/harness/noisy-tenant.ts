/**
 * A noisy tenant, in a process of its own (as another tenant's runtime would be): closed-loop
 * workers that each alternate AppendMessages of a batch of coding messages and Assemble of their own
 * session, retrying at once whatever they are refused, until SIGTERM. It writes one JSON line when
 * its first call succeeded (`noisy warm`) and one with its counts when it stops (`noisy done`).
 *
 *   node dist/bench/harness/noisy-tenant.js '{"address":"127.0.0.1:5000","token":"t","workers":96,"agents":8,"batch":20,"budget":32000}'
 *
 * A process of its own so that what the measured tenant sees is contextd's doing: the workers'
 * answers (Assembles of ~100 KB) decoded in the measuring process would delay its own calls, and
 * one process's clients share one HTTP/2 connection.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "./clients.js";
import { codingMessages } from "./messages.js";
import { nowMs } from "./stats.js";

interface Options {
  address: string;
  token: string;
  workers: number;
  agents: number;
  batch: number;
  budget: number;
  /** Messages generated up front, taken round-robin by the workers. */
  poolSize: number;
}

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? "{}") as Options;
  const pool: Message[] = [];
  for (let seed = 900; pool.length < opts.poolSize; seed++) pool.push(...codingMessages({ count: 500, seed }));
  let next = 0;
  const take = (n: number): Message[] => Array.from({ length: n }, () => pool[next++ % pool.length]);
  const client = new ContextdClient({ address: opts.address, token: opts.token, timeoutMs: 60_000 });
  const counts = { ok: 0, refused: 0, errors: 0, ms: 0, refusals: {} as Record<string, number>, errorCodes: {} as Record<string, number> };
  let stop = false;
  let warm = false;
  const t0 = nowMs();
  const worker = async (w: number) => {
    const session = { sessionId: `noisy-${w}`, agentId: `noisy-${w % opts.agents}` };
    // The next call alternates only after a success: a refused append is retried as an append.
    for (let i = 0; !stop;) {
      try {
        if (i % 2 === 0) await client.appendMessages({ session, messages: take(opts.batch) });
        else await client.assemble({ session, tokenBudget: opts.budget });
        counts.ok++;
        i++;
        if (!warm) {
          warm = true;
          console.log(JSON.stringify({ msg: "noisy warm" }));
        }
      } catch (err) {
        const e = err as ServiceError;
        if (e.code === status.RESOURCE_EXHAUSTED) {
          counts.refused++;
          const limit = /\((limits\.[a-z_.]+|server\.[a-z_]+)\)/.exec(e.details)?.[1] ?? "other";
          counts.refusals[limit] = (counts.refusals[limit] ?? 0) + 1;
        } else {
          i++;
          counts.errors++;
          const code = status[e.code] ?? String(e.code);
          counts.errorCodes[code] = (counts.errorCodes[code] ?? 0) + 1;
        }
      }
    }
  };
  const running = Promise.all(Array.from({ length: opts.workers }, (_, w) => worker(w)));
  process.once("SIGTERM", () => {
    stop = true;
    void running.then(() => {
      counts.ms = nowMs() - t0;
      console.log(JSON.stringify({ msg: "noisy done", ...counts }));
      client.close();
      process.exit(0);
    });
  });
}

void main();
