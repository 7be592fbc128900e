/**
 * Engine ids (the rules on RegistryService, proto/contextd/v1/registry.proto). An engine id is a
 * config key (slots, overrides, owners' reservations), a metric label, a log field and a column
 * `contextctl engines` prints: it is bounded and plain, so two ids that look alike are the same
 * bytes and none can act on a terminal. Allowed: ASCII letters,
 * digits, `.`, `_` and `-`, starting with a letter or digit, at most 128 characters. Ids are
 * compared exactly; any id that reads as `legacy` whatever its case is refused, so nothing can pass
 * for the built-in fallback in a table or a log.
 */
export const LEGACY_ENGINE_ID = "legacy";
/** The owner of `legacy`: contextd itself. No caller can prove it and no config can name it. */
export const CORE_OWNER = "core";
export const MAX_ENGINE_ID_LENGTH = 128;

const ENGINE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Why `id` is not a usable engine id, or undefined when it is. `legacy` itself is valid (it is built in). */
export function engineIdProblem(id: string): string | undefined {
  if (id === "") return "is empty";
  if (id.length > MAX_ENGINE_ID_LENGTH) return `is longer than ${MAX_ENGINE_ID_LENGTH} characters (${id.length})`;
  if (!ENGINE_ID.test(id)) return "may hold only ASCII letters, digits, '.', '_' and '-', and must start with a letter or digit";
  if (id !== LEGACY_ENGINE_ID && id.toLowerCase() === LEGACY_ENGINE_ID) return `reads as "${LEGACY_ENGINE_ID}", the built-in engine`;
  return undefined;
}
