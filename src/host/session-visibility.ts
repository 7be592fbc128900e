import { PermissionDeniedError, SessionExistsError, SessionNotFoundError } from "../contract/errors.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { SessionRecord, TranscriptStore } from "../store/types.js";
import type { RuntimeAccess } from "./runtime-access.js";
import { requireSession } from "./validate.js";

/**
 * How an RPC uses a session it names: `existing` — it must exist (GetSession, Maintain, …);
 * `create` — it may be created by the call (AppendMessages; ImportTranscript and a subagent child,
 * which the store then requires to be new); `view` — it must exist, and the host's first read is
 * the session's active view, which holds the session row: the claim is checked here, and the host
 * admits the session on the row it reads (`admitExisting`, SessionHost.readView) instead of reading
 * the row twice (Assemble, Compact, AfterTurn: a store round trip less per call); the store reads
 * the entries only of a session within the caller's agents, so a refusal costs what a miss costs.
 */
export type SessionUse = "existing" | "create" | "view";

/** The one NOT_FOUND of SessionService: a missing session and another agent's look the same. */
export function sessionNotFound(sessionId: string): SessionNotFoundError {
  return new SessionNotFoundError(sessionId);
}

/**
 * Resolves the session a request names against the caller's credentials, before the host reads or
 * writes anything of it, and answers the session as the host is to use it: with the stored agent
 * and key (the stored agent id, not the one a request claims, decides what a token may do and which
 * engine serves it). A new ref: the request is never written. For `view` use the answer is the
 * checked claim; the host completes it on the row its first read holds (`admitExisting`).
 *
 * The order is what keeps session ids of other agents secret:
 * 1. The agent id the request claims is checked against the token before any store read: a
 *    PERMISSION_DENIED then says only "your token does not cover the agent you named".
 * 2. A session of an agent the token does not cover is treated as missing: for every RPC that
 *    needs the session, NOT_FOUND with the very message a missing session gets (sessionNotFound).
 * 3. An RPC that creates the session cannot treat an id held by another agent as missing — the
 *    create would collide — so it answers ALREADY_EXISTS "session … already exists", the answer
 *    an import or a subagent child gets for an existing id of the caller's own. Ids are one
 *    namespace, so a create can always tell that an id is taken (as AIP-133 creates with
 *    client-chosen ids do); it learns nothing else: not whose, not which agent, nothing inside.
 *    NOT_FOUND would say the same thing (a missing id would have been created) while misnaming
 *    the failure, and PERMISSION_DENIED would also say that it is another agent's.
 * 4. A create without an agent id, by a token limited to named agents, is refused naming
 *    `agent_id` (it would create a session of agent "", which such a token does not cover).
 */
export async function resolveSession(
  store: TranscriptStore,
  access: RuntimeAccess,
  ref: SessionRef | undefined,
  field: string,
  use: SessionUse,
): Promise<SessionRef> {
  const checked = requireSession(ref, field);
  if (checked.agentId) access.checkAgent(checked.agentId);
  if (use === "view") return checked;
  const stored = await store.getSession(checked.sessionId);
  if (use === "existing") return admitExisting(access, checked, stored);
  if (stored && !access.mayActFor(stored.agentId)) throw new SessionExistsError(checked.sessionId);
  if (!stored) {
    if (!access.mayActFor(checked.agentId)) {
      throw new PermissionDeniedError(`${field}.agent_id is required: this runtime token may act only for the agents it names`);
    }
    return checked;
  }
  return { ...checked, agentId: stored.agentId, sessionKey: checked.sessionKey || stored.sessionKey };
}

/**
 * Step 2 of resolveSession for a session that must exist, on its row as read (undefined: none):
 * another agent's session is missing; the answer is `ref` with the stored agent and key.
 */
export function admitExisting(access: RuntimeAccess, ref: SessionRef, stored: Pick<SessionRecord, "agentId" | "sessionKey"> | undefined): SessionRef {
  if (!stored || !access.mayActFor(stored.agentId)) throw sessionNotFound(ref.sessionId);
  return { ...ref, agentId: stored.agentId, sessionKey: ref.sessionKey || stored.sessionKey };
}
