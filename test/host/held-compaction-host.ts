/**
 * A real SessionHost in process, for races between appends and compactions: the real Router,
 * EngineRegistry (with the real `legacy` engine and native compaction), Compactions, tokenizer and a
 * store opened by openStore on a fresh place — a SQLite file in a temp dir, or a scratch database on
 * the local PostgreSQL server (test/store/conformance/harness.ts) — wired as src/server/contextd.ts
 * wires them. The one stand-in is the selected engine, an outside component written here against
 * the ContextEngine interface (as test/unit/registry-fixture.ts does): it holds every Compact until
 * the test answers it, which is what makes the compaction take time while appends go on.
 */
import { pino } from "pino";
import type { CallContext, ContextEngine } from "../../src/contract/engine-api.js";
import {
  EngineInfo,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type IngestResponse,
} from "../../src/contract/gen/contextd/v1/engine.js";
import { PromptAuthority, type Message, type SessionRef } from "../../src/contract/gen/contextd/v1/types.js";
import { Compactions } from "../../src/host/compactions.js";
import { pageKey } from "../../src/host/page-token.js";
import { agentScope } from "../../src/host/runtime-access.js";
import type { HostCall } from "../../src/host/host-call.js";
import { SessionHost } from "../../src/host/session-host.js";
import { resolveSession, type Resolved, type SessionUse } from "../../src/host/session-visibility.js";
import { LegacyEngine } from "../../src/registry/legacy-engine.js";
import { createExtractiveSummarizer } from "../../src/compaction/summarizer/extractive.js";
import { EngineRegistry } from "../../src/registry/engine-registry.js";
import { HostGrants } from "../../src/registry/host-grants.js";
import type { EngineOperation } from "../../src/registry/engine-call-observer.js";
import { Router } from "../../src/registry/router.js";
import { openStore, type ContextdStore } from "../../src/store/open-store.js";
import type { TranscriptStore } from "../../src/store/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import { postgresFactory, sqliteFactory } from "../store/conformance/harness.js";
import { addSidecar } from "../unit/registry-fixture.js";

export const ENGINE_ID = "held";

/** One Compact the engine is holding: what it was sent, and how to answer it. */
export interface HeldCompact {
  /** The view the host sent (message ids are entry ids). */
  messages: Message[];
  answer(response: ContextEngineServiceCompactResponse): void;
}

/**
 * Ingest and Assemble answer at once (Assemble hands the view back, as `legacy` does); Compact is
 * held until the test answers it. `ownsCompaction` decides whether Assemble's auto-compaction is the
 * host's native one (false) or this engine's business (true).
 */
export class HeldCompactionEngine implements ContextEngine {
  private readonly arrived: HeldCompact[] = [];
  private readonly waiting: Array<(held: HeldCompact) => void> = [];

  readonly id = ENGINE_ID;

  constructor(private readonly ownsCompaction: boolean) {}

  info(): EngineInfo {
    return EngineInfo.fromPartial({ id: ENGINE_ID, name: "holds compactions", version: "1", ownsCompaction: this.ownsCompaction, protocolVersions: [1] });
  }

  async ingest(): Promise<IngestResponse> {
    return { ingested: true };
  }

  async assemble(req: ContextEngineServiceAssembleRequest): Promise<ContextEngineServiceAssembleResponse> {
    const estimatedTokens = req.messages.reduce((sum, m) => sum + m.tokenCount, 0);
    return { messages: req.messages, keptEntryIds: [], estimatedTokens, systemPromptAddition: "", promptAuthority: PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED };
  }

  compact(req: ContextEngineServiceCompactRequest, ctx: CallContext): Promise<ContextEngineServiceCompactResponse> {
    return new Promise((resolve, reject) => {
      ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason as Error), { once: true });
      const held: HeldCompact = { messages: req.messages, answer: resolve };
      const waiter = this.waiting.shift();
      if (waiter) waiter(held);
      else this.arrived.push(held);
    });
  }

  /** The next Compact to arrive (or the oldest one already held): resolves when it is here. */
  nextCompact(): Promise<HeldCompact> {
    const held = this.arrived.shift();
    if (held) return Promise.resolve(held);
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}

/** Long enough that no engine call of these tests times out while the test holds it. */
const TIMEOUT_MS = 60_000;

export interface HostFixtureOptions {
  ownsCompaction: boolean;
  maxSessionEntries?: number;
}

export type StoreKind = "sqlite" | "postgres";

/**
 * A host on a fresh store place of `kind`; `replica()` builds another host with its own store on
 * the same place (another connection; for PostgreSQL another pool, as a replica has). `close`
 * closes every store and removes the place.
 */
export async function heldCompactionHost(kind: StoreKind, options: HostFixtureOptions) {
  const place = await (kind === "sqlite" ? sqliteFactory : postgresFactory).createPlace();
  const stores: ContextdStore[] = [];
  const build = async () => {
    const store = await openStore(place.url);
    stores.push(store);
    return { store, ...wireHost(store, options) };
  };
  try {
    return {
      ...(await build()),
      replica: build,
      async close() {
        for (const s of stores.splice(0)) await s.close();
        await place.destroy();
      },
    };
  } catch (err) {
    for (const s of stores.splice(0)) await s.close();
    await place.destroy();
    throw err;
  }
}

function wireHost(store: ContextdStore, options: HostFixtureOptions) {
  const engine = new HeldCompactionEngine(options.ownsCompaction);
  // An engine failure must fail the test, not be hidden by a fallback to legacy.
  const { host } = inProcessHost(store, engine, { contextEngine: ENGINE_ID, onFailure: "strict", maxSessionEntries: options.maxSessionEntries });
  return { engine, host };
}

/**
 * A SessionHost wired as src/server/contextd.ts wires one, in process, on `store`: `engine` registered
 * beside `legacy` (native compaction with the extractive summarizer), `contextEngine` selected.
 */
export function inProcessHost(
  store: TranscriptStore,
  engine: ContextEngine & { readonly id: string },
  options: { contextEngine: string; onFailure: "fallback" | "strict"; maxSessionEntries?: number },
) {
  const tokenizer = createTokenizer("o200k_base");
  const native = {
    tokenizer,
    summarizer: createExtractiveSummarizer(),
    settings: { reserveTokens: 0, keepRecentTokens: 120, summaryMaxChars: 600 },
  };
  const registry = new EngineRegistry(new LegacyEngine(native));
  addSidecar(registry, engine);
  const ops: EngineOperation[] = ["ingest", "assemble", "compact", "after_turn", "maintain", "bootstrap", "subagent"];
  const router = new Router(
    registry,
    {
      contextEngine: options.contextEngine,
      agents: {},
      timeoutsMs: Object.fromEntries(ops.map((op) => [op, TIMEOUT_MS])) as Record<EngineOperation, number>,
      onFailure: options.onFailure,
      maxConcurrentCalls: 64,
      fallbackReserveMs: 0,
      overrides: {},
    },
    new HostGrants("127.0.0.1:7070"),
  );
  const compactions = new Compactions(store, native);
  const limits = { maxMessageBytes: 1 << 20, maxMessagesPerAppend: 100, maxSessionEntries: options.maxSessionEntries ?? 1_000_000, maxImportBytes: 1 << 20 };
  return { host: new SessionHost(store, tokenizer, router, compactions, limits), router, compactions, tokenizer };
}

/** What SessionService hands the host for a runtime with auth off: every agent, no deadline. */
export function runtimeCall(): HostCall {
  return {
    deadlineMs: Number.POSITIVE_INFINITY,
    log: pino({ level: "silent" }),
    access: { checkAgent: () => undefined, mayActFor: () => true, agents: agentScope(["*"]), pageKey: pageKey(undefined) },
  };
}

/** `session` as SessionService's session step hands it to the host for a runtimeCall() (session-visibility.ts). */
export function resolved<U extends SessionUse>(host: SessionHost, session: SessionRef, use: U): Promise<Resolved<U>> {
  return resolveSession(host.store, runtimeCall().access, session, "session", use);
}
