export { contextdMiddleware, type ContextdMiddlewareOptions } from "./middleware.js";
export { contextdTools } from "./tools.js";
export { toContextd, fromContextd, answerMessage, messageKey, outputText, APPROVAL_CUSTOM_TYPE } from "./message-mapping.js";
export { placeCacheBreakpoints, DEFAULT_CACHE_BREAKPOINT_PROVIDERS, type CacheBreakpointOptions, type CacheBreakpointProvider } from "./cache-breakpoints.js";
export { promptCacheOf } from "./cache-usage.js";
