import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, ServerCredentials, type Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { EngineEventType } from "../contract/gen/contextd/v1/registry.js";
import { redactUrlCredentials } from "../contract/redact.js";
import { Compactions } from "../host/compactions.js";
import { TranscriptExports } from "../host/export-transcript.js";
import { TranscriptImports } from "../host/import-transcript.js";
import { SessionHost } from "../host/session-host.js";
import { SessionQueries } from "../host/session-queries.js";
import { SubagentSweeper } from "../host/subagent-sweeper.js";
import { ForgetDeliveries } from "../host/forget-delivery.js";
import { RetentionPolicy } from "../host/retention.js";
import { RetentionSweeper } from "../host/retention-sweeper.js";
import { SessionDeletions } from "../host/session-deletions.js";
import { ServedEngines } from "../registry/served-engines.js";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { AgentQuotas } from "../host/agent-quotas.js";
import { AuditTrail } from "./audit-trail.js";
import { Subagents } from "../host/subagents.js";
import { LegacyEngine } from "../registry/legacy-engine.js";
import { createChatModel, createSummarizer } from "../compaction/summarizer/create-summarizer.js";
import { ExtractiveThread } from "../compaction/summarizer/extractive-thread.js";
import { Admission } from "../registry/admission.js";
import { EndpointAllowList } from "../registry/endpoint-allow-list.js";
import { EngineReservations } from "../registry/engine-reservations.js";
import { EngineEvents } from "../registry/engine-events.js";
import { EngineRegistry } from "../registry/engine-registry.js";
import { HealthMonitor } from "../registry/health-monitor.js";
import { HostGrants } from "../registry/host-grants.js";
import { Quarantine } from "../registry/quarantine.js";
import { RegistrySync } from "../registry/registry-sync.js";
import type { EngineDialing } from "../registry/remote-engine.js";
import { engineCounters } from "../registry/engine-counters.js";
import { observeAll } from "../registry/engine-call-observer.js";
import { Router } from "../registry/router.js";
import { openStore, type ContextdStore } from "../store/open-store.js";
import { createTokenizer } from "../tokens/create-tokenizer.js";
import { Authenticator } from "./auth.js";
import { defaultHostEndpoint } from "./config.js";
import { engineCredentials, serverCredentials } from "./credentials.js";
import { ManagedSidecars } from "./managed-sidecars.js";
import type { ContextdSettings } from "./settings.js";
import { chain, serverInterceptors } from "./middleware/interceptors.js";
import { InFlightLimit, loadShedding } from "./middleware/load-shedding.js";
import { tenantAdmission } from "./middleware/tenant-admission.js";
import { engineCallMetrics } from "./observability/engine-call-metrics.js";
import { instrumentStore } from "./observability/instrumented-store.js";
import { ContextdMetrics, engineGauges } from "./observability/metrics.js";
import { MetricsServer } from "./observability/metrics-server.js";
import { engineLatency } from "./observability/engine-latency.js";
import { CsrfTokens } from "./explorer/csrf.js";
import { ExplorerApi } from "./explorer/explorer-api.js";
import { ExplorerHttp } from "./explorer/explorer-http.js";
import { ExplorerFiles } from "./explorer/explorer-static.js";
import { createTracing, type Tracing } from "./observability/tracing.js";
import { servedRpcs, servedServices } from "./served-services.js";
import { addStandardServices, StorePing, type ContextdHealth } from "./standard-services.js";
import { TenantLimits } from "../contract/tenant-limits.js";

const MIN_GRPC_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Deadline of the GetInfo and health probes before an engine is admitted. */
const ADMISSION_PROBE_MS = 3_000;

/**
 * Wires the layers together (runtime → SessionService → router → engine → store) and owns the
 * server's lifecycle.
 */
export class Contextd {
  private constructor(
    private readonly settings: ContextdSettings,
    private readonly store: ContextdStore,
    private readonly server: Server,
    private readonly health: ContextdHealth,
    private readonly grants: HostGrants,
    private readonly monitor: HealthMonitor,
    private readonly sidecars: ManagedSidecars,
    private readonly events: EngineEvents,
    private readonly storePing: StorePing,
    private readonly logger: Logger,
    private readonly metricsServer: MetricsServer,
    private readonly tracing: Tracing,
    /** Loops that run while contextd listens: the registry sync across replicas, the subagent TTL sweep, forget delivery, the retention sweep. */
    private readonly background: Array<{ start(): void; stop(): Promise<void> }> = [],
    private readonly explorer?: PrivateSocket & { api: ExplorerApi },
  ) {}

  /** The bound metrics address once listening (`metrics_listen`; the real port when 0 was asked). */
  metricsAddress = "";

  get storeKind(): string {
    return this.store.kind;
  }

  /** `settings`: compileSettings(loadConfig(…)) (settings.ts). */
  static async create(settings: ContextdSettings, logger: Logger): Promise<Contextd> {
    const auth = new Authenticator(settings.auth, process.env);
    if (!settings.auth.required) logger.warn("auth.required is false: every caller is trusted (local development only)");
    // offload: what requests bring is counted on worker threads, by turns between tenants, not on the
    // event loop that answers everyone (src/tokens/count-pool.ts).
    const tokenizer = createTokenizer(settings.tokenizer.name, { imageTokens: settings.tokenizer.imageTokens, offload: true });
    const summarizerLog = logger.child({ component: "summarizer" });
    // One chat model (when `openai` is configured) serves both the summarizer and HostService.Complete.
    const model = createChatModel(settings.summarizer, { env: process.env, log: summarizerLog });
    if (model && model.timeoutMs > settings.routing.timeoutsMs.assemble) {
      // Auto-compaction before Assemble runs inside the Assemble deadline: a slow model there makes
      // the Assemble time out instead of falling back to extractive.
      logger.warn(
        { summarizer_timeout_ms: model.timeoutMs, assemble_timeout_ms: settings.routing.timeoutsMs.assemble },
        "compaction.summarizer.timeout is longer than engines.timeouts.assemble: an Assemble that must auto-compact may hit its deadline while the model writes; raise engines.timeouts.assemble or compact ahead of the budget (Compact, AfterTurn)",
      );
    }
    const compactionDeps = {
      summarizer: createSummarizer(settings.summarizer, {
        model,
        log: summarizerLog,
        countTokens: (text: string) => tokenizer.countText(text),
        // Beside the event loop: a compaction's summary is hundreds of ms of CPU on a large view.
        extractive: new ExtractiveThread().summarizer(),
      }),
      tokenizer,
      settings: settings.compaction,
    };
    const limits = settings.limits;
    const tenantLimits = new TenantLimits(settings.tenants);
    const opened = await openStore(settings.store);
    // For measuring only (bench/scenarios/observability_overhead.ts): what contextd costs without its
    // metrics, tracing and access-log middleware. Not a configuration: production always has them.
    const bare = process.env.CONTEXTD_BENCH_NO_OBSERVABILITY === "1";
    const metrics = new ContextdMetrics(() => opened.countSessions());
    const tracing = createTracing(settings.tracing);
    // The endpoint may carry credentials (https://user:pass@collector): logged without them.
    if (tracing.enabled)
      logger.info({ otlp_endpoint: redactUrlCredentials(settings.tracing.otlpEndpoint ?? "") }, "tracing on: spans are exported over OTLP/HTTP");
    const store = bare ? opened : instrumentStore(opened, metrics.storeOperationDuration);

    // Registry: engines, their events, quarantine, health, admission, routing.
    const registry = new EngineRegistry(new LegacyEngine(compactionDeps));
    const events = new EngineEvents();
    const quarantine = new Quarantine(registry, store, settings.quarantine, events, logger);
    const monitor = new HealthMonitor(
      registry,
      quarantine,
      events,
      settings.engineHealth,
      logger,
      // Admission removes it (admission is built below; nothing is checked before start).
      (instance, why) => admission.expire(instance, why),
    );
    const allowList = new EndpointAllowList(settings.allowEndpoints);
    const dialing: EngineDialing = { credentials: engineCredentials(settings.engineTls), answerLimits: settings.answerLimits };
    const admission = new Admission(
      registry,
      store,
      quarantine,
      allowList,
      events,
      { probeTimeoutMs: ADMISSION_PROBE_MS, dialing, maxInstances: settings.maxEngineInstances },
      logger,
      new EngineReservations(settings.reservedEngines),
    );
    await admission.restore();
    await quarantine.restore();
    const sync = new RegistrySync(
      registry,
      store,
      quarantine,
      events,
      { reconcileIntervalMs: settings.reconcileIntervalMs, dialing, allowList },
      logger.child({ component: "registry-sync" }),
      (added) => void monitor.check(added).catch(() => undefined),
    );
    const grants = new HostGrants(settings.hostEndpoint);
    // An engine quarantined (by an operator, its health, a failure) or deregistered — here or at
    // another replica — loses its standing at once: its live host tokens are refused and its calls
    // in flight are ended and answered by legacy.
    // One instance's event ends that instance's calls only; its siblings serve on.
    events.subscribe((event) => {
      const id = event.engine?.engineId;
      if (!id) return;
      const instance = event.instanceId;
      if (event.type === EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED)
        grants.revokeEngine(id, "quarantined", `engine "${id}" was quarantined (${event.message})`, instance);
      if (event.type === EngineEventType.ENGINE_EVENT_TYPE_DEREGISTERED) grants.revokeEngine(id, "deregistered", `engine "${id}" was deregistered`, instance);
    });
    const router = new Router(
      registry,
      settings.routing,
      grants,
      observeAll(engineCounters, quarantine, bare ? undefined : engineCallMetrics(metrics, tracing)),
      new ServedEngines(store),
    );
    metrics.watchEngines(() => registry.list().map((r) => engineGauges(registry.status(r.id))));

    // Host: sessions and engine callbacks.
    const observer = bare ? undefined : metrics.hostObserver();
    if (!bare) model?.spend.observe(metrics.spendObserver());
    const compactions = new Compactions(store, compactionDeps, observer);
    const host = new SessionHost(store, tokenizer, router, compactions, limits, observer, undefined, logger.child({ component: "background-maintenance" }));
    const sweeper = new SubagentSweeper(store, router, { intervalMs: settings.subagentSweepIntervalMs }, logger.child({ component: "subagent-sweeper" }));

    // Deletion reaches every engine: each deletion records a ForgetSession per engine that served
    // the session, which one replica at a time delivers (under a row lease) until acknowledged.
    const replicaName = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    const deletions = new SessionDeletions(store, observer);
    const forgets = new ForgetDeliveries(
      store,
      registry,
      { ...settings.forget, timeoutMs: (id) => router.timeoutMs(id, "forget"), owner: replicaName },
      logger.child({ component: "forget-delivery" }),
      observer,
    );
    deletions.onRecorded = () => forgets.kick();
    // An engine that is back (registered, released) hears what it missed at once.
    events.subscribe((event) => {
      const id = event.engine?.engineId;
      if (id && (event.type === EngineEventType.ENGINE_EVENT_TYPE_REGISTERED || event.type === EngineEventType.ENGINE_EVENT_TYPE_RELEASED))
        void forgets.wake(id);
    });
    const retention = new RetentionPolicy(settings.retention);
    const retentionSweeper = new RetentionSweeper(store, retention, deletions, replicaName, logger.child({ component: "retention" }));
    if (!bare) metrics.watchForgetDeliveries(() => store.countForgetDeliveries());

    // Room for a whole batch and for an import at its cap, so those limits answer with their own names.
    const maxBytes = Math.max(MIN_GRPC_MESSAGE_BYTES, limits.maxMessageBytes * 4, limits.maxImportBytes + (1 << 20));
    const inFlight = new InFlightLimit(settings.server.maxConcurrentCalls);
    metrics.watchInFlight(() => inFlight.active);
    metrics.watchTokenCounting(() => tokenizer.stats());
    const quotas = new AgentQuotas(store, settings.quotas);
    const audit = new AuditTrail(
      store,
      auth,
      { retentionMs: settings.auditRetentionMs, reservations: settings.reservedEngines },
      logger.child({ component: "audit" }),
    );
    const services = servedServices({
      auth,
      store,
      tenantLimits,
      host,
      queries: new SessionQueries(host, store, router, deletions, retention, quotas),
      subagents: new Subagents(host, store, deletions),
      imports: new TranscriptImports(store, tokenizer, limits),
      exports: new TranscriptExports(store, maxBytes),
      registry,
      admission,
      quarantine,
      events,
      grants,
      compactions,
      tokenizer,
      limits,
      model,
      quotas,
      audit: audit.record,
    });
    const rpcs = servedRpcs(services);
    const shedding = {
      limit: inFlight,
      logger,
      rpcs,
      shed: (m: { service: string; name: string }) => metrics.child(metrics.rpcShed, { grpc_service: m.service, grpc_method: m.name }).inc(),
    };
    const tenants = { limits: tenantLimits, tenantOf: (md: Metadata) => auth.tenantOf(md), rpcs };
    // The middleware chain: interceptors around every RPC of every service (request id, tracing,
    // metrics and access log, load shedding, tenant admission), then each service's pipeline
    // (bind-service.ts: the row's authorization rule, the turn, the session step, the handler, the
    // error mapping). The bench's bare variant keeps the admission steps: they are not observability.
    const server = new Server({
      "grpc.max_receive_message_length": maxBytes,
      "grpc.max_send_message_length": maxBytes,
      ...(settings.server.maxConcurrentStreams !== undefined ? { "grpc.max_concurrent_streams": settings.server.maxConcurrentStreams } : {}),
      interceptors: bare ? [chain([loadShedding(shedding), tenantAdmission(tenants)])] : serverInterceptors({ logger, metrics, tracing, shedding, tenants }),
    });
    for (const service of services) service.addTo(server, logger);
    const health = addStandardServices(
      server,
      services.map((service) => service.name),
    );
    const sidecars = new ManagedSidecars(settings.managed, auth, logger);
    const storePing = new StorePing(store, health, settings.health, logger.child({ component: "store-ping" }));
    // The context explorer calls this server's own services, over a socket only this process knows
    // (explorer-api.ts): the same pipeline, authorization and errors as any gRPC caller.
    let explorer: (PrivateSocket & { api: ExplorerApi }) | undefined;
    if (settings.explorer) {
      const dir = mkdtempSync(join(tmpdir(), "contextd-explorer-"));
      const address = `unix:${join(dir, "grpc.sock")}`;
      explorer = { dir, address, api: new ExplorerApi(address, new CsrfTokens(), auth, () => engineLatency(metrics.engineCallDuration)) };
    }
    const metricsServer = new MetricsServer(
      metrics.registry,
      { ready: async () => (health.status === "SERVING" ? { ok: true } : { ok: false, reason: health.reason || "NOT_SERVING" }) },
      explorer ? new ExplorerHttp(explorer.api, new ExplorerFiles()) : undefined,
    );
    return new Contextd(
      settings,
      store,
      server,
      health,
      grants,
      monitor,
      sidecars,
      events,
      storePing,
      logger,
      metricsServer,
      tracing,
      [sync, sweeper, host.background, forgets, retentionSweeper, audit],
      explorer,
    );
  }

  /**
   * Binds the configured gRPC address and `metrics_listen`; resolves with the bound gRPC address (the
   * real port when 0 was asked). A taken port rejects, naming it.
   */
  async listen(): Promise<string> {
    this.metricsAddress = await this.metricsServer.listen(this.settings.metricsListen).catch((err: Error) => {
      throw new Error(`metrics_listen ${this.settings.metricsListen}: ${err.message}`);
    });
    return this.listenGrpc();
  }

  private async listenGrpc(): Promise<string> {
    const explorer = this.explorer;
    if (explorer)
      await new Promise<void>((resolve, reject) =>
        this.server.bindAsync(explorer.address, ServerCredentials.createInsecure(), (err) =>
          err ? reject(new Error(`explorer socket: ${err.message}`)) : resolve(),
        ),
      );
    const listen = this.settings.listen;
    return new Promise((resolve, reject) => {
      this.server.bindAsync(listen, serverCredentials(this.settings.tls), (err, port) => {
        if (err) return reject(new Error(`listen ${listen}: ${err.message}`));
        const address = listen.startsWith("unix:") ? listen : `${listen.slice(0, listen.lastIndexOf(":"))}:${port}`;
        // Engines call HostService at host_endpoint; with port 0 only the bound address is real.
        if (this.settings.hostEndpoint === defaultHostEndpoint(listen)) this.grants.endpoint = defaultHostEndpoint(address);
        this.health.listening();
        this.storePing.start();
        this.monitor.start();
        void this.monitor.checkAll();
        for (const loop of this.background) loop.start();
        this.sidecars.start(defaultHostEndpoint(address));
        resolve(address);
      });
    });
  }

  /**
   * The SIGTERM drain, in this order:
   *
   * 1. grpc.health.v1 says NOT_SERVING (for good), while every call is still served as usual:
   *    load balancers that health-check (HAProxy, Envoy, Kubernetes readiness) stop sending new
   *    calls here. This lasts `health.drain_delay` (0 by default: set it to at least the balancer's
   *    check interval × its failure count);
   * 2. managed sidecars stop (while the registry still answers their deregistration);
   * 3. Watch streams (health, WatchEngines) end, and the server stops taking calls: the listener
   *    closes and every connection gets an HTTP/2 GOAWAY, so clients and proxies send new calls to
   *    another replica (a call the GOAWAY refused was never processed and is safe to resend);
   * 4. calls in flight finish, for at most `health.shutdown_grace`; the ones still running then are
   *    cancelled;
   * 5. the store closes.
   *
   * `stopDrainDelay`, when it fires, cuts step 1 short (a second SIGTERM/SIGINT).
   */
  async shutdown(options: { stopDrainDelay?: AbortSignal } = {}): Promise<void> {
    const { drainDelayMs, shutdownGraceMs: graceMs } = this.settings.health;
    this.health.drain();
    this.storePing.stop();
    this.logger.info({ drain_delay_ms: drainDelayMs, shutdown_grace_ms: graceMs }, "contextd draining: health NOT_SERVING");
    if (drainDelayMs > 0) await delay(drainDelayMs, options.stopDrainDelay);
    await this.sidecars.stop();
    this.monitor.stop();
    this.events.closeAll();
    this.health.endWatches();
    this.logger.info({ shutdown_grace_ms: graceMs }, "contextd stopped taking new calls; waiting for the calls in flight");
    const started = Date.now();
    const graceful = await new Promise<boolean>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve(false);
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve(true);
      });
    });
    if (graceful) this.logger.info({ ms: Date.now() - started }, "contextd stopped taking calls; the calls in flight finished");
    else this.logger.warn({ shutdown_grace_ms: graceMs }, "health.shutdown_grace expired: calls still in flight were cancelled");
    await this.close();
  }

  async close(): Promise<void> {
    this.storePing.stop();
    await Promise.all(this.background.map((loop) => loop.stop()));
    await this.metricsServer.close();
    if (this.explorer) {
      this.explorer.api.close();
      rmSync(this.explorer.dir, { recursive: true, force: true });
    }
    await this.tracing.shutdown();
    await this.store.close();
  }
}

/** A unix socket in a directory of its own (mode 0700, mkdtemp), removed at close. */
interface PrivateSocket {
  dir: string;
  address: string;
}

/** Resolves after `ms`, or at once when `signal` fires. */
function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
