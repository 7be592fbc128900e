import { engineIdProblem, LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import type { ContextdConfig } from "./config-schema.js";

type Path = (string | number)[];
type Fail = (path: Path, why: string) => Error;

/**
 * Which owner holds which engine id by configuration (`auth.owners.<owner>.engines`, and each managed
 * sidecar's own id for its `owner`), checked at start so a conflict is a config error rather than a
 * race at registration. With `auth.required`, every engine a slot routes to must be reserved: an
 * unreserved id is first-come, and a first-come id on the routing path would hand an agent's
 * sessions (and live host tokens for them) to whoever registers it first — e.g. while the intended
 * engine restarts. Without auth (local development) anyone may register anything anyway.
 */
export function engineReservations(cfg: ContextdConfig, fail: Fail): Array<[string, string]> {
  const holders = new Map<string, { owner: string; path: Path }>();
  const reserve = (id: string, owner: string, path: Path) => {
    const problem = engineIdProblem(id);
    if (problem) throw fail(path, `engine id ${JSON.stringify(id)} ${problem}`);
    if (id === LEGACY_ENGINE_ID) throw fail(path, `"${LEGACY_ENGINE_ID}" is built in and owned by core (contextd itself); it cannot be reserved`);
    const held = holders.get(id);
    if (held && held.owner !== owner) {
      throw fail(path, `engine ${JSON.stringify(id)} is reserved for ${JSON.stringify(held.owner)} at ${held.path.join(".")}; an id has one owner`);
    }
    holders.set(id, held ?? { owner, path });
  };
  for (const [owner, o] of Object.entries(cfg.auth.owners)) o.engines.forEach((id, i) => reserve(id, owner, ["auth", "owners", owner, "engines", i]));
  cfg.engines.managed.forEach((m, i) => reserve(m.id, m.owner, ["engines", "managed", i, "owner"]));

  if (cfg.auth.required) {
    const slots: Array<[Path, string]> = [
      [["slots", "context_engine"], cfg.slots.context_engine],
      ...Object.entries(cfg.slots.agents).map(([agent, id]): [Path, string] => [["slots", "agents", agent], id]),
    ];
    for (const [path, id] of slots) {
      if (id === LEGACY_ENGINE_ID || holders.has(id)) continue;
      throw fail(
        path,
        `engine ${JSON.stringify(id)} is not reserved for any owner: with auth.required, list it in auth.owners.<owner>.engines ` +
          "(or run it as an engines.managed sidecar) so that no other owner can register it and receive this slot's sessions",
      );
    }
  }
  return [...holders].map(([id, h]) => [id, h.owner]);
}
