/**
 * Runs the lossless engine as a sidecar:
 *
 *   CONTEXTD_REGISTRY=127.0.0.1:50051 CONTEXTD_OWNER=acme CONTEXTD_OWNER_TOKEN=… \
 *   LOSSLESS_DB=./data/lossless.db node dist/engines/lossless/main.js
 *
 * Reads the LOSSLESS_* settings (config.ts), opens the store, and serves the engine with the SDK,
 * which takes the registry, owner, token and listen address from the standard CONTEXTD_*
 * variables, registers, and on SIGTERM deregisters and drains before the store is closed.
 * Logs are pino JSON on stderr (level from CONTEXTD_LOG_LEVEL, default info).
 */
import { serveEngine } from "contextd/engine-sdk";
import pino from "pino";
import { losslessOptionsFromEnv, resolveLosslessOptions } from "./config.js";
import { LOSSLESS_ENGINE_ID, LosslessEngine } from "./engine.js";
import { LosslessStore } from "./store.js";

async function main(): Promise<void> {
  const log = pino(
    { name: LOSSLESS_ENGINE_ID, level: process.env.CONTEXTD_LOG_LEVEL?.trim() || "info", timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 2, sync: true }),
  );
  const options = resolveLosslessOptions(losslessOptionsFromEnv(process.env));
  const store = LosslessStore.open(options.dbPath);
  const engine = new LosslessEngine(store, options);
  const running = await serveEngine(engine, { logger: log, onShutdown: () => store.close() });
  log.info(
    { address: running.address, db: options.dbPath, freshTailTokens: options.freshTailTokens, chunkTokens: options.chunkTokens, fanout: options.fanout },
    "lossless engine ready",
  );
}

main().catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  console.error(message.startsWith("lossless:") ? message : `lossless: ${message}`);
  process.exit(1);
});
