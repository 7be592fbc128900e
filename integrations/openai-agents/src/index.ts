export { ContextdSession, PopUnsupportedError, MESSAGE_KEY_PREFIX, type ContextdSessionOptions } from "./session.js";
export { itemToMessage, messageToItem, SKELETON_KEY, CUSTOM_TYPE_PREFIX } from "./items.js";
export { contextdTools, type ContextdToolsOptions } from "./tools.js";
