import { status, type ContextdClient, type ServiceError } from "contextd/client";
import type { PluginLogger, PluginService } from "./openclaw-api.js";

/**
 * A Gateway service that checks contextd every `healthCheckIntervalMs` (30 s) with a cheap
 * authorized call (ListSessions of one): `openclaw health` and `openclaw status --deep` then show "contextd unreachable" (or a
 * refused token) as a failure of this plugin, and the log says once when contextd answers
 * (`contextd: connected to contextd at …`). OpenClaw starts services in the Gateway only; a one-shot
 * `openclaw agent --local` run logs per session instead (serving-log.ts).
 */
export function healthService(client: () => Promise<ContextdClient>, address: string, intervalMs: number, fallbackLog: PluginLogger): PluginService {
  let timer: NodeJS.Timeout | undefined;
  return {
    id: "contextd-health",
    async start(ctx) {
      const log = ctx.logger ?? fallbackLog;
      let healthy: boolean | undefined;
      const check = async () => {
        try {
          await (await client()).listSessions({ pageSize: 1 }, { timeoutMs: 5_000 });
          ctx.serviceHealth?.clearFailure();
          if (healthy !== true) log.info(`contextd: connected to contextd at ${address}; OpenClaw's context engine is served by it`);
          healthy = true;
        } catch (err) {
          const e = err as ServiceError;
          const why = typeof e?.code === "number" ? `${status[e.code] ?? e.code}: ${e.details || e.message}` : String(err);
          ctx.serviceHealth?.reportFailure(new Error(`contextd at ${address} does not answer: ${why}`));
          if (healthy !== false) log.warn(`contextd: contextd at ${address} does not answer (${why}); turns fall back to OpenClaw's own history until it does`);
          healthy = false;
        }
      };
      await check();
      timer = setInterval(() => void check(), intervalMs);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
