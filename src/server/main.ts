import { parseArgs } from "node:util";
import { ConfigError, loadConfig, misspeltEnvVariables } from "./config.js";
import { Contextd } from "./contextd.js";
import { applyHeapGrowth } from "./heap-growth.js";
import { createLogger } from "./logger.js";
import { compileSettings } from "./settings.js";

/**
 * `contextd [--config FILE]`: loads and validates the config (a bad key exits 2 with a one-line
 * reason), starts the server, logs `contextd listening` with the bound address, and drains on
 * SIGTERM/SIGINT (see Contextd.shutdown), then exits 0.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: "string", short: "c" } }, allowPositionals: false });
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ file: values.config, env: process.env });
  } catch (err) {
    if (err instanceof ConfigError) fail(2, err.message);
    throw err;
  }
  // A process-wide V8 setting: the process's entry point applies it, before any load.
  const settings = compileSettings(config);
  applyHeapGrowth(settings.server.heapGrowthPercent);
  const logger = createLogger(config.log_level);
  for (const { variable, meant } of misspeltEnvVariables(process.env))
    logger.warn({ variable, meant }, `${variable} is not a config variable and is ignored; did you mean ${meant}?`);
  let contextd: Contextd;
  try {
    contextd = await Contextd.create(settings, logger);
  } catch (err) {
    if (err instanceof ConfigError) fail(2, err.message);
    fail(1, `cannot start: ${err instanceof Error ? err.message : String(err)}`);
  }
  let address: string;
  try {
    address = await contextd.listen();
  } catch (err) {
    await contextd.close();
    fail(1, `cannot listen: ${err instanceof Error ? err.message : String(err)}`);
  }
  logger.info({ address, metrics_address: contextd.metricsAddress, store: contextd.storeKind, auth_required: config.auth.required }, "contextd listening");

  // The first SIGTERM/SIGINT drains (Contextd.shutdown: NOT_SERVING, health.drain_delay, no new
  // calls, the calls in flight finish within health.shutdown_grace); a second one during the drain
  // delay cuts the delay short.
  let stopping = false;
  const skipDrainDelay = new AbortController();
  const stop = (signal: string) => {
    if (stopping) {
      if (!skipDrainDelay.signal.aborted) logger.info({ signal }, "second signal: skipping the rest of the drain delay");
      skipDrainDelay.abort();
      return;
    }
    stopping = true;
    logger.info({ signal }, "contextd shutting down");
    contextd
      .shutdown({ stopDrainDelay: skipDrainDelay.signal })
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

function fail(code: number, message: string): never {
  process.stderr.write(`contextd: ${message.replace(/\s*\n\s*/g, " ")}\n`);
  process.exit(code);
}

await main();
