/**
 * memory: peak resident memory of contextd holding 10 000 sessions (--quick: 1 000) of 50 messages,
 * each session appended (one AppendMessages of 50 small coding messages) and then assembled once
 * (budget 32k, no compaction needed), 8 sessions in flight at a time. The peak is VmHWM of the
 * contextd process from /proc (Linux). Message contents cycle through 100 pre-generated sessions, so
 * the bench itself stays small; contextd stores every session separately all the same.
 */
import { sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { codingMessages } from "../harness/messages.js";
import { readRss } from "../harness/rss.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { round } from "../harness/stats.js";

const MESSAGES = 50;
const BUDGET = 32_000;
const IN_FLIGHT = 8;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const sessions = ctx.quick ? 1_000 : 10_000;
  const pool = Array.from({ length: 100 }, (_, i) => codingMessages({ count: MESSAGES, seed: 5_000 + i, size: "small" }));
  const cd = await startContextd();
  const client = sessionClient(cd.address);
  try {
    const baseline = readRss(cd.pid);
    if (!baseline) {
      return {
        metrics: { rss_mb_10k_sessions: null, reason: "/proc/PID/status is not readable (not Linux?)" },
        goals: [{ key: "rss_mb_10k_sessions", op: "<=", target: 220 }],
      };
    }
    let next = 0;
    let done = 0;
    let tokens = 0;
    let maxRss = baseline.rssMb;
    const sampler = setInterval(() => {
      const r = readRss(cd.pid);
      if (r) maxRss = Math.max(maxRss, r.rssMb);
    }, 250);
    const t0 = performance.now();
    try {
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < sessions) {
            const i = next++;
            const session = { sessionId: `memory-${i}`, agentId: "bench" };
            await client.appendMessages({ session, messages: pool[i % pool.length] });
            const a = await client.assemble({ session, tokenBudget: BUDGET });
            tokens += a.estimatedTokens;
            if (++done % 50 === 0) ctx.progress.update(done, sessions, `${done} sessions`);
          }
        }),
      );
    } finally {
      clearInterval(sampler);
    }
    const seconds = (performance.now() - t0) / 1000;
    const end = readRss(cd.pid)!;
    return {
      metrics: {
        rss_mb_10k_sessions: round(end.hwmMb, 1),
        sessions,
        messages_per_session: MESSAGES,
        rss_mb_at_end: round(end.rssMb, 1),
        rss_mb_after_start: round(baseline.rssMb, 1),
        rss_mb_max_sampled: round(maxRss, 1),
        avg_tokens_per_session: round(tokens / sessions, 0),
        seconds_to_fill: round(seconds, 1),
        ...(ctx.quick ? { quick: "1 000 sessions, not extrapolated" } : {}),
      },
      goals: [{ key: "rss_mb_10k_sessions", op: "<=", target: 220 }],
      headline: ["sessions", "rss_mb_after_start", "rss_mb_at_end"],
      notes: [
        `${sessions} sessions × ${MESSAGES} messages (~${Math.round(tokens / sessions)} tokens each), appended and assembled once, ${IN_FLIGHT} sessions in flight; filled in ${seconds.toFixed(0)} s`,
        "rss_mb_10k_sessions is VmHWM (peak RSS) of the contextd process at the end" + (ctx.quick ? "; --quick: 1 000 sessions, not extrapolated" : ""),
      ],
    };
  } finally {
    client.close();
    await cd.stop();
  }
}

export const memory: Scenario = {
  name: "memory",
  title: "Peak RSS of contextd holding 10 000 sessions of 50 messages, appended and assembled once",
  run,
};
