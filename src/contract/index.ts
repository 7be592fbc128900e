// The public contract for package users: the shared types, errors and helpers. Service-specific
// request/response types live in ./gen/contextd/v1/<service>.js (ts-proto emits a few helper
// names in every file, so they cannot all be re-exported from one module).
export * from "./gen/contextd/v1/types.js";
export * from "./errors.js";
// Machine-readable error reasons (proto/contextd/v1/errors.proto): what a failed call's trailer
// carries, and errorReason() / errorDetails() to read it from a grpc-js error.
export { ErrorReason, errorReasonFromJSON, errorReasonToJSON } from "./gen/contextd/v1/errors.js";
export { ERROR_DOMAIN, errorDetails, errorReason, type ErrorDetails } from "./error-details.js";
export * from "./messages.js";
export * from "./engine-api.js";
export { ContextEngineServiceService, ContextEngineServiceClient, EngineInfo } from "./gen/contextd/v1/engine.js";
export { SessionServiceService, SessionServiceClient } from "./gen/contextd/v1/session.js";
export { RegistryServiceService, RegistryServiceClient } from "./gen/contextd/v1/registry.js";
export { HostServiceService, HostServiceClient } from "./gen/contextd/v1/host.js";
export { SearchOrder, SearchScope, searchOrderToJSON, searchScopeToJSON } from "./gen/contextd/v1/search.js";
export * from "./quote.js";
export * from "./engine-id.js";
// The prompt budget of a compaction (docs/concepts.md, "Budgets"): the host and engines that own
// compaction plan by it.
export * from "./prompt-budget.js";
