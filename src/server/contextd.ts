import { Server, type Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import { HostServiceService } from "../contract/gen/contextd/v1/host.js";
import { RegistryServiceService } from "../contract/gen/contextd/v1/registry.js";
import { SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import { Compactions } from "../host/compactions.js";
import { createHostService } from "../host/host-service.js";
import { SessionHost } from "../host/session-host.js";
import { SessionQueries } from "../host/session-queries.js";
import { createSessionService } from "../host/session-service.js";
import { Subagents } from "../host/subagents.js";
import { LegacyEngine } from "../legacy/legacy-engine.js";
import { createSummarizer } from "../legacy/summarizer/create-summarizer.js";
import { EngineRegistry } from "../registry/engine-registry.js";
import { createRegistryService } from "../registry/registry-service.js";
import { Router } from "../registry/router.js";
import { openStore } from "../store/open-store.js";
import type { TranscriptStore } from "../store/types.js";
import { createTokenizer } from "../tokens/create-tokenizer.js";
import { Authenticator } from "./auth.js";
import type { ContextdConfig } from "./config.js";
import { routingSettings } from "./routing-settings.js";
import { serverCredentials } from "./credentials.js";
import { addStandardServices, setServing } from "./standard-services.js";

const SERVICE_NAMES = ["contextd.v1.SessionService", "contextd.v1.RegistryService", "contextd.v1.HostService"];
const MIN_GRPC_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Wires the layers together (runtime → SessionService → router → engine → store) and owns the
 * gRPC server's lifecycle.
 */
export class Contextd {
  private constructor(
    private readonly config: ContextdConfig,
    private readonly logger: Logger,
    private readonly store: TranscriptStore,
    private readonly server: Server,
    private readonly health: ReturnType<typeof addStandardServices>,
  ) {}

  get storeKind(): string {
    return this.store.kind;
  }

  static async create(config: ContextdConfig, logger: Logger): Promise<Contextd> {
    const auth = new Authenticator(config.auth, process.env);
    if (!config.auth.required) logger.warn("auth.required is false: every caller is trusted (local development only)");
    const tokenizer = createTokenizer(config.tokenizer, { imageTokens: config.image_tokens });
    const compactionDeps = {
      summarizer: createSummarizer(config.compaction.summarizer),
      tokenizer,
      settings: {
        reserveTokens: config.compaction.reserve_tokens,
        keepRecentTokens: config.compaction.keep_recent_tokens,
        summaryMaxChars: config.compaction.summary_max_chars,
      },
    };
    const store = await openStore(config.store);
    const registry = new EngineRegistry(new LegacyEngine(compactionDeps));
    const router = new Router(registry, routingSettings(config));
    const host = new SessionHost(store, tokenizer, router, new Compactions(store, compactionDeps), {
      maxMessageBytes: config.limits.max_message_bytes,
      maxMessagesPerAppend: config.limits.max_messages_per_append,
      maxSessionEntries: config.limits.max_session_entries,
    });

    const maxBytes = Math.max(MIN_GRPC_MESSAGE_BYTES, config.limits.max_message_bytes * 4);
    const server = new Server({ "grpc.max_receive_message_length": maxBytes, "grpc.max_send_message_length": maxBytes });
    const authorizer = {
      authorizeRuntime: (metadata: Metadata, sessions: (SessionRef | undefined)[]) => {
        const principal = auth.runtime(metadata);
        for (const s of sessions) if (s) auth.checkAgent(principal, s.agentId);
      },
      authorizeReader: (metadata: Metadata) => {
        try {
          auth.runtime(metadata);
        } catch (err) {
          try {
            auth.operator(metadata);
          } catch {
            throw err;
          }
        }
      },
    };
    server.addService(
      SessionServiceService,
      createSessionService(host, new SessionQueries(host, store, router), new Subagents(host, store), authorizer, logger),
    );
    server.addService(RegistryServiceService, createRegistryService(registry, authorizer, logger));
    server.addService(HostServiceService, createHostService(logger));
    const health = addStandardServices(server, SERVICE_NAMES);
    return new Contextd(config, logger, store, server, health);
  }

  /** Binds the configured address; resolves with the bound address (the real port when 0 was asked). */
  listen(): Promise<string> {
    const listen = this.config.listen;
    return new Promise((resolve, reject) => {
      this.server.bindAsync(listen, serverCredentials(this.config.tls), (err, port) => {
        if (err) return reject(err);
        setServing(this.health, SERVICE_NAMES, true);
        resolve(listen.startsWith("unix:") ? listen : `${listen.slice(0, listen.lastIndexOf(":"))}:${port}`);
      });
    });
  }

  /** Stops taking calls, lets calls in flight finish (bounded), then closes the store. */
  async shutdown(graceMs = 10_000): Promise<void> {
    setServing(this.health, SERVICE_NAMES, false);
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
    await this.close();
  }

  async close(): Promise<void> {
    await this.store.close();
  }
}
