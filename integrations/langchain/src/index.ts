export { contextdMiddleware, type ContextdMiddlewareOptions } from "./middleware.js";
export { contextdTools, type ContextdToolsOptions } from "./tools.js";
export { toContextd, fromContextd, fromContextdMessage, messageKey, CUSTOM_TYPE_PREFIX } from "./message-mapping.js";
export { modelSystemMessage } from "./system-message.js";
