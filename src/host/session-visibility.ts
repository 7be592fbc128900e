import { PermissionDeniedError, SessionExistsError, SessionNotFoundError } from "../contract/errors.js";
import type { SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { ActiveView, SessionRecord, TranscriptStore } from "../store/types.js";
import type { RuntimeAccess } from "./runtime-access.js";
import { requireSession } from "./validate.js";

/**
 * How an RPC uses a session it names: `existing` — it must exist (GetSession, Maintain, …);
 * `create` — it may be created by the call (AppendMessages; ImportTranscript and a subagent child,
 * which the store then requires to be new); `view` — it must exist, and the host's first read is
 * the session's active view, which holds the session row: the claim is checked here, and the
 * session admitted on the row that read holds (SessionView) instead of reading the row twice
 * (Assemble, Compact, AfterTurn: a store round trip less per call); the store reads the entries
 * only of a session within the caller's agents, so a refusal costs what a miss costs.
 */
export type SessionUse = "existing" | "create" | "view";

declare const admittedBrand: unique symbol;

/**
 * A session admitted against the caller's credentials, as the host is to use it: the stored agent
 * and key (the stored agent id, not the one a request claims, decides what a token may do and which
 * engine serves it). Only this file makes one, so a host operation that takes one cannot be reached
 * without the check; an operation on a session already admitted (a re-read after a compaction) may
 * use it again.
 */
export type AdmittedSession = SessionRef & { readonly [admittedBrand]: true };

/** A `view` session once read: the session admitted on the row its active view holds, and the view. */
export interface ViewedSession {
  session: AdmittedSession;
  view: ActiveView;
}

/**
 * A `view` session before its read: the claim, checked against the token, and the one read that
 * admits it — made by the handler once it has checked the rest of its request (so a bad budget is
 * refused without a store read). The only way to a ViewedSession.
 */
export interface SessionView {
  readonly claimed: SessionRef;
  read(): Promise<ViewedSession>;
}

/** What a session of each use resolves to: the handler's argument for it. */
export type Resolved<U extends SessionUse> = U extends "view" ? SessionView : AdmittedSession;

/** The one NOT_FOUND of SessionService: a missing session and another agent's look the same. */
export function sessionNotFound(sessionId: string): SessionNotFoundError {
  return new SessionNotFoundError(sessionId);
}

/**
 * Resolves the session a request names against the caller's credentials, before the host reads or
 * writes anything of it, and answers it as the host is to use it (AdmittedSession). A new ref: the
 * request is never written. For `view` use the answer is the checked claim and its read
 * (SessionView), which completes it on the row the view holds.
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
export async function resolveSession<U extends SessionUse>(
  store: TranscriptStore,
  access: RuntimeAccess,
  ref: SessionRef | undefined,
  field: string,
  use: U,
): Promise<Resolved<U>> {
  const checked = requireSession(ref, field);
  if (checked.agentId) access.checkAgent(checked.agentId);
  if (use === "view") return sessionView(store, access, checked) as Resolved<U>;
  const stored = await store.getSession(checked.sessionId);
  if (use === "existing") return admitExisting(access, checked, stored) as Resolved<U>;
  if (stored && !access.mayActFor(stored.agentId)) throw new SessionExistsError(checked.sessionId);
  if (!stored) {
    if (!access.mayActFor(checked.agentId)) {
      throw new PermissionDeniedError(`${field}.agent_id is required: this runtime token may act only for the agents it names`);
    }
    return checked as AdmittedSession as Resolved<U>;
  }
  return admitted({ ...checked, agentId: stored.agentId, sessionKey: checked.sessionKey || stored.sessionKey }) as Resolved<U>;
}

/**
 * Step 2 of resolveSession for a session that must exist, on its row as read (undefined: none):
 * another agent's session is missing (`missing`, by default sessionNotFound); the answer is `ref`
 * with the stored agent and key.
 */
export function admitExisting(
  access: RuntimeAccess,
  ref: SessionRef,
  stored: Pick<SessionRecord, "agentId" | "sessionKey"> | undefined,
  missing: (sessionId: string) => Error = sessionNotFound,
): AdmittedSession {
  if (!stored || !access.mayActFor(stored.agentId)) throw missing(ref.sessionId);
  return admitted({ ...ref, agentId: stored.agentId, sessionKey: ref.sessionKey || stored.sessionKey });
}

/**
 * The read of a `view` session: its active view, with the session admitted on the row the view
 * holds — another agent's session is missing, refused by the store on its row before any of its
 * entries is read, so the refusal takes the time a missing id takes.
 */
function sessionView(store: TranscriptStore, access: RuntimeAccess, claimed: SessionRef): SessionView {
  return {
    claimed,
    async read() {
      const view = await store.readActiveView(claimed.sessionId, access.agents);
      const session = admitExisting(access, claimed, view?.session);
      return { session, view: view! };
    },
  };
}

function admitted(ref: SessionRef): AdmittedSession {
  return ref as AdmittedSession;
}
