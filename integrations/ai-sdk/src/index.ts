export { contextdMiddleware, type ContextdMiddlewareOptions } from "./middleware.js";
export { contextdTools } from "./tools.js";
export { toContextd, fromContextd, answerMessage, messageKey, outputText, APPROVAL_CUSTOM_TYPE } from "./message-mapping.js";
