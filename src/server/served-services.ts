import type { ServiceDefinition, UntypedServiceImplementation } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { AuditServiceService } from "../contract/gen/contextd/v1/audit.js";
import { HostServiceService } from "../contract/gen/contextd/v1/host.js";
import { RegistryServiceService } from "../contract/gen/contextd/v1/registry.js";
import { AssembleResponse, SessionServiceService } from "../contract/gen/contextd/v1/session.js";
import { withSplicedMessages } from "../contract/encoded-messages.js";
import { withReceivedMessages } from "../contract/received-messages.js";
import { NO_SESSIONS, type AuthRule, type ServiceTable } from "../contract/rpc-table.js";
import type { TenantLimits } from "../contract/tenant-limits.js";
import type { ChatModel } from "../compaction/summarizer/create-summarizer.js";
import type { Compactions } from "../host/compactions.js";
import type { TranscriptExports } from "../host/export-transcript.js";
import { grantedSession, hostService } from "../host/host-service.js";
import type { TranscriptImports } from "../host/import-transcript.js";
import type { SessionHost } from "../host/session-host.js";
import type { SessionQueries } from "../host/session-queries.js";
import { sessionService, sessionStep } from "../host/session-service.js";
import type { Subagents } from "../host/subagents.js";
import type { AppendLimits } from "../host/validate.js";
import type { Admission } from "../registry/admission.js";
import type { EngineEvents } from "../registry/engine-events.js";
import type { EngineRegistry } from "../registry/engine-registry.js";
import type { HostGrants } from "../registry/host-grants.js";
import type { Quarantine } from "../registry/quarantine.js";
import { registryService } from "../registry/registry-service.js";
import type { TranscriptStore } from "../store/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import type { Authenticator } from "./auth.js";
import { hostAuthorization, registryAuthorization, sessionAuthorization } from "./authorization.js";
import { bindService, decodingDefinition, type BindOptions } from "./middleware/bind-service.js";
import type { ServedRpc } from "./middleware/step.js";
import type { AuditSink } from "./middleware/audit-step.js";
import { auditService } from "./audit-service.js";
import type { AgentQuotas } from "../host/agent-quotas.js";

/** A service contextd serves: its generated definition, its table, and how it is registered. */
export interface ServedService {
  /** The fully-qualified service name (`contextd.v1.SessionService`). */
  name: string;
  definition: ServiceDefinition;
  table: Readonly<Record<string, ServedRpc & { session: unknown }>>;
  /** Adds it to the server, bound through the pipeline (bind-service.ts). */
  addTo(server: { addService(definition: ServiceDefinition, implementation: UntypedServiceImplementation): void }, logger: Logger): void;
}

/** What the services' tables and pipeline steps are made of (src/server/contextd.ts builds them). */
export interface ServedServiceDeps {
  auth: Authenticator;
  store: TranscriptStore;
  tenantLimits: TenantLimits;
  host: SessionHost;
  queries: SessionQueries;
  subagents: Subagents;
  imports: TranscriptImports;
  exports: TranscriptExports;
  registry: EngineRegistry;
  admission: Admission;
  quarantine: Quarantine;
  events: EngineEvents;
  grants: HostGrants;
  compactions: Compactions;
  tokenizer: Tokenizer;
  limits: AppendLimits;
  model?: ChatModel;
  quotas: AgentQuotas;
  /** The audit step's sink (audit-trail.ts): the rows that declare `audit` are recorded through it. */
  audit: AuditSink;
}

/**
 * The services contextd serves, each with its table (its rows: authorization rule, sessions,
 * deadline class, handler) and the steps that interpret it: the rule's authorization, the call's
 * turn, the service's session step. The one list the server registers, the admission steps read
 * (servedRpcs) and the tests hold to the generated definitions.
 */
export function servedServices(d: ServedServiceDeps): ServedService[] {
  return [
    served(
      SessionServiceService,
      sessionService(d.host, d.queries, d.subagents, d.imports, d.exports),
      // The request stays bytes until the call's turn: the `runtime` rule does not read it.
      decodingDefinition(withReceivedMessages(withSplicedMessages(SessionServiceService, "assemble", "response", AssembleResponse, 1), "appendMessages", 2), {
        deferred: true,
      }),
      {
        authorize: sessionAuthorization(d.auth),
        turn: (principal, signal) => d.tenantLimits.turn(principal.tenant, signal),
        sessions: sessionStep(d.store, d.tenantLimits, d.quotas),
        audit: d.audit,
      },
    ),
    served(RegistryServiceService, registryService(d.registry, d.admission, d.quarantine, d.events), decodingDefinition(RegistryServiceService), {
      authorize: registryAuthorization(d.auth),
      sessions: NO_SESSIONS,
      audit: d.audit,
    }),
    served(AuditServiceService, auditService(d.store), decodingDefinition(AuditServiceService), {
      authorize: registryAuthorization(d.auth),
      sessions: NO_SESSIONS,
    }),
    served(HostServiceService, hostService(d.store, d.compactions, d.tokenizer, d.limits, d.model), decodingDefinition(HostServiceService), {
      authorize: hostAuthorization(d.grants),
      sessions: grantedSession,
    }),
  ];
}

/** Each served RPC by its method path (`/contextd.v1.SessionService/Assemble`): what the admission steps read. */
export function servedRpcs(services: ServedService[]): ReadonlyMap<string, ServedRpc> {
  const rpcs = new Map<string, ServedRpc>();
  for (const service of services) {
    for (const [name, method] of Object.entries(service.definition)) {
      const row = service.table[name];
      rpcs.set(method.path, { auth: row.auth, deadline: row.deadline });
    }
  }
  return rpcs;
}

function served<Def extends ServiceDefinition, P, Rule extends AuthRule, Session, Extra>(
  definition: Def,
  table: ServiceTable<Def, P, Rule, Session, Extra>,
  wire: Def,
  options: Omit<BindOptions<P, Rule, Session, Extra>, "logger">,
): ServedService {
  const first = Object.values(definition)[0];
  return {
    name: first.path.slice(1, first.path.lastIndexOf("/")),
    definition,
    table: table as unknown as ServedService["table"],
    addTo: (server, logger) => server.addService(wire, bindService(definition, table, { ...options, logger })),
  };
}
