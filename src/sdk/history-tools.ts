import { status, type ServiceError } from "@grpc/grpc-js";
import { z } from "zod";
import { errorDetails } from "../contract/error-details.js";
import { SearchHit, SearchOrder, SearchScope } from "../contract/gen/contextd/v1/search.js";
import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { isSummaryMessage } from "../contract/messages.js";
import { previewContext } from "./assembled-context.js";
import { messageBody, roleName } from "./message-text.js";
import type { CallOptions, ContextdClient } from "./runtime-client.js";

/**
 * The history tools a model calls — `search`, `expand`, `context`, `sessions` — defined once for
 * every framework that hands tools to a model: the MCP server (src/mcp/), OpenClaw agent tools,
 * and any adapter to come. Each tool is a name, a description written for the model, an input
 * schema (zod 4; `z.toJSONSchema(tool.inputSchema)` for a framework that wants JSON Schema) and
 * `run`, which calls contextd through a runtime client and answers text a model reads.
 *
 * Nothing here trusts its input: `run` validates it against the schema again (a framework may
 * not), contextd checks every request as it does any runtime's (tenant scoping, limits, sealed page
 * tokens), and every answer is bounded — at most `maxChars` characters, with a page token to
 * continue from where it was cut. A refusal by contextd (NOT_FOUND, INVALID_ARGUMENT naming a
 * field, …) becomes an error result that says which argument to fix; it is never thrown.
 */

/** What the caller binds: the current session when there is one, the budget of its turns. */
export interface HistoryToolDefaults {
  /** The session a tool acts on when the model names none (OpenClaw binds the current session). */
  sessionId?: string;
  /**
   * Limits `sessions` to this agent's sessions (a runtime token may cover several agents), and
   * routes `context` as this agent. Unset: the session's own agent; every session the token covers.
   */
  agentId?: string;
  /** `context`'s token budget when the model gives none. Default {@link DEFAULT_TOKEN_BUDGET}. */
  tokenBudget?: number;
  /** The longest text a tool answers, in characters. Default {@link DEFAULT_MAX_CHARS}. */
  maxChars?: number;
  /** Deadline of each contextd call, ms (the client's own default when unset). */
  timeoutMs?: number;
}

/** What a tool answers. */
export interface HistoryToolResult {
  /** What the model reads: the answer, or on an error what went wrong and what to change. */
  text: string;
  /** The call failed (bad input, unknown session, contextd unreachable); `text` says why. */
  isError: boolean;
  /** The same answer as JSON-safe data, for a framework that passes structured results on. */
  data?: Record<string, unknown>;
}

/** What belongs to one call of a tool rather than to its binding. */
export interface HistoryToolCall {
  signal?: AbortSignal;
}

/** One tool. `Schema` is its input's zod object. */
export interface HistoryTool<Schema extends z.ZodObject = z.ZodObject> {
  name: string;
  /** A human-readable title (MCP `title`, OpenClaw `label`). */
  title: string;
  /** For the model: what the tool is for, when to call it, what its answer means. */
  description: string;
  inputSchema: Schema;
  /** Never rejects: every failure is an error result. `call.signal` cancels the contextd calls (the tool call was cancelled). */
  run(client: ContextdClient, input: unknown, defaults?: HistoryToolDefaults, call?: HistoryToolCall): Promise<HistoryToolResult>;
}

export const DEFAULT_MAX_CHARS = 20_000;
export const DEFAULT_TOKEN_BUDGET = 32_000;
/** The most characters of one entry or message shown before it is cut (expand and context). */
const ENTRY_CHARS = 8_000;
/** Entries `expand` reads looking for a message entry by id (GetTranscript pages of 5000). */
const MAX_SCAN_ENTRIES = 50_000;
const SCAN_PAGE = 5_000;

const sessionId = z
  .string()
  .min(1, { error: "session_id must not be empty" })
  .max(256, { error: "session_id: at most 256 characters" })
  .optional()
  .describe("The session to use. Omit it for the current session.");
const pageToken = z
  .string()
  .max(4096, { error: "page_token: at most 4096 characters" })
  .optional()
  .describe("The page_token of the previous answer of this same call, to read on. Omit it for the first page.");

const searchInput = z.strictObject({
  query: z
    .string({ error: "query is required: the words to find" })
    .min(1, { error: "query must not be empty" })
    .max(512, { error: "query: at most 512 characters" })
    .describe(
      'Words and "quoted phrases" that a past message must all contain. Matching is by whole words, ignoring case and accents; punctuation separates words, so file names, ids and error codes work as written (invoice_rounding.ts, BILL-4821, ENOENT).',
    ),
  session_id: sessionId,
  all_sessions: z.boolean().optional().describe("true: search every session of this agent, not only this one."),
  order: z.enum(["newest", "relevance"]).optional().describe("newest (default): most recent first. relevance: best matches first (among the 1000 newest)."),
  limit: z.int().min(1, { error: "limit: at least 1" }).max(50, { error: "limit: at most 50" }).optional().describe("Hits per page, 1 to 50 (default 20)."),
  page_token: pageToken,
});

const expandInput = z.strictObject({
  entry_id: z
    .string({ error: "entry_id is required: an entry id from search or context" })
    .min(1, { error: "entry_id must not be empty" })
    .max(256, { error: "entry_id: at most 256 characters" })
    .describe("The entry to read: a search hit's entry id, or a summary's id from context."),
  session_id: sessionId.describe("The entry's session (a search hit names it). Omit it for the current session."),
  limit: z
    .int()
    .min(1, { error: "limit: at least 1" })
    .max(200, { error: "limit: at most 200" })
    .optional()
    .describe("For a summary: entries per page, 1 to 200 (default 50)."),
  page_token: pageToken,
});

const contextInput = z.strictObject({
  session_id: sessionId,
  token_budget: z
    .int()
    .min(1, { error: "token_budget: at least 1" })
    .max(10_000_000, { error: "token_budget: at most 10000000" })
    .optional()
    .describe("The turn's token budget. Omit it for the runtime's default."),
  prompt: z
    .string()
    .max(4096, { error: "prompt: at most 4096 characters" })
    .optional()
    .describe("The next user prompt, for engines that pick history by relevance. Omit it to use the latest user message."),
  page_token: pageToken,
});

const sessionsInput = z.strictObject({
  limit: z
    .int()
    .min(1, { error: "limit: at least 1" })
    .max(100, { error: "limit: at most 100" })
    .optional()
    .describe("Sessions per page, 1 to 100 (default 20)."),
  page_token: pageToken,
});

export type SearchInput = z.infer<typeof searchInput>;
export type ExpandInput = z.infer<typeof expandInput>;
export type ContextInput = z.infer<typeof contextInput>;
export type SessionsInput = z.infer<typeof sessionsInput>;

export const searchTool: HistoryTool<typeof searchInput> = {
  name: "search",
  title: "Search the conversation history",
  description:
    "Search the whole history of this conversation for exact words — including what is no longer in your context. " +
    "Older turns are compacted: folded into short summaries to fit the context window, so their details (file paths, ids, " +
    "numbers, error messages, decisions and their reasons) are gone from what you see but kept word for word in the history. " +
    "Use this before saying you do not know or asking the user again, whenever something was said or done earlier than what you can see. " +
    'A query is words and "quoted phrases", all of which must appear; it is not a regular expression and has no OR. ' +
    "Each hit names its entry id, session, position (#seq), who said it (or 'summary' for a compaction summary) and time, " +
    "and a snippet with the matched words marked «like this». Call expand with a hit's entry id (and its session) to read the entry in full, " +
    "or, for a summary, the original messages it stands for.",
  inputSchema: searchInput,
  run: (client, input, defaults, call) => guarded(searchInput, input, (args) => search(client, args, { ...defaults, signal: call?.signal })),
};

export const expandTool: HistoryTool<typeof expandInput> = {
  name: "expand",
  title: "Read a history entry in full",
  description:
    "Read one entry of the conversation history in full. Give an entry id from search (or a summary's id from context). " +
    "For a message, you get its whole text with the messages just before and after it. " +
    "For a compaction summary, you get the original messages that the summary stands for, oldest first, word for word — " +
    "use this when a summary mentions something you need the details of; an earlier summary it folded in is named so you can expand it too. " +
    "Long answers come in pages: call again with the page_token given.",
  inputSchema: expandInput,
  run: (client, input, defaults, call) => guarded(expandInput, input, (args) => expand(client, args, { ...defaults, signal: call?.signal })),
};

export const contextTool: HistoryTool<typeof contextInput> = {
  name: "context",
  title: "Show what the model is sent",
  description:
    "Show exactly what would be sent to the model on this conversation's next turn, within a token budget: " +
    "the summary of compacted history (if any), then the messages kept, each with its role, entry id and tokens, " +
    "and the totals by section. Only looks: it never compacts or changes the conversation. " +
    "Use it to see what was compacted into a summary and what is still verbatim; expand a summary's entry id to read what it replaced.",
  inputSchema: contextInput,
  run: (client, input, defaults, call) => guarded(contextInput, input, (args) => context(client, args, { ...defaults, signal: call?.signal })),
};

export const sessionsTool: HistoryTool<typeof sessionsInput> = {
  name: "sessions",
  title: "List conversations",
  description:
    "List the conversations (sessions) whose history you may read, most recently active first: each session id, " +
    "its agent, how many messages and compactions it holds and when it was last active. " +
    "Use a session id with search, expand or context to look into that conversation.",
  inputSchema: sessionsInput,
  run: (client, input, defaults, call) => guarded(sessionsInput, input, (args) => sessions(client, args, { ...defaults, signal: call?.signal })),
};

/** Every history tool, in the order a framework should list them. */
export const historyTools = [searchTool, expandTool, contextTool, sessionsTool] as const;

// ---- search -----------------------------------------------------------------------------------

async function search(client: ContextdClient, args: SearchInput, d: Bound): Promise<HistoryToolResult> {
  const session = requireSession(args.session_id, d);
  if (typeof session !== "string") return session;
  const cursor = readCursor(args.page_token, "search");
  if (!cursor.ok) return cursor.failure;
  const res = await client.searchTranscript(
    {
      session: { sessionId: session },
      query: args.query,
      scope: args.all_sessions ? SearchScope.SEARCH_SCOPE_AGENT : SearchScope.SEARCH_SCOPE_SESSION,
      order: args.order === "relevance" ? SearchOrder.SEARCH_ORDER_RELEVANCE : SearchOrder.SEARCH_ORDER_NEWEST,
      pageSize: args.limit ?? 20,
      pageToken: cursor.at.t,
    },
    callOptions(d),
  );
  const where = args.all_sessions ? `every session of the agent of session ${session}` : `session ${session}`;
  const hits = res.hits.slice(cursor.at.s);
  if (hits.length === 0 && !res.nextPageToken)
    return ok(args.page_token ? `No more hits for ${JSON.stringify(args.query)} in ${where}.` : `No hits for ${JSON.stringify(args.query)} in ${where}.`, {
      hits: [],
      next_page_token: "",
    });
  const out = new Bounded(maxChars(d));
  out.line(`Hits for ${JSON.stringify(args.query)} in ${where}, ${args.order === "relevance" ? "best first" : "newest first"}:`);
  const shown = out.lines(hits.map(hitText));
  const next = nextCursor(cursor.at, shown, hits.length, res.nextPageToken);
  if (next) out.note(`More hits: call search again with the same arguments and page_token ${JSON.stringify(next)}.`);
  return ok(out.text(), { hits: hits.slice(0, shown).map((h) => SearchHit.toJSON(h)), next_page_token: next });
}

function hitText(h: SearchHit): string {
  const who = h.compaction ? "summary" : roleName(h.role);
  const flags = h.hidden ? " · hidden (not in any context)" : "";
  return `- entry ${h.entryId} · session ${h.sessionId} · #${h.seq} · ${who} · ${iso(h.timestampMs)}${flags}\n  ${h.snippet}`;
}

// ---- expand -----------------------------------------------------------------------------------

async function expand(client: ContextdClient, args: ExpandInput, d: Bound): Promise<HistoryToolResult> {
  const session = requireSession(args.session_id, d);
  if (typeof session !== "string") return session;
  const read = readCursor(args.page_token, "expand");
  if (!read.ok) return read.failure;
  const cursor = read.at;
  let res;
  try {
    res = await client.expandCompaction(
      { session: { sessionId: session }, compactionEntryId: args.entry_id, pageSize: args.limit ?? 50, pageToken: cursor.t },
      callOptions(d),
    );
  } catch (err) {
    // Not a compaction (a message, or no such entry): read it where it is in the transcript.
    const field = errorDetails(err)?.fieldViolations[0]?.field;
    if ((err as ServiceError).code === status.INVALID_ARGUMENT && field === "compaction_entry_id" && !args.page_token)
      return readEntry(client, session, args.entry_id, d);
    throw err;
  }
  const out = new Bounded(maxChars(d));
  const entries = res.entries.slice(cursor.s);
  if (cursor.t === "" && cursor.s === 0) {
    out.line(
      res.entries.length === 0 && !res.nextPageToken
        ? `Compaction summary ${args.entry_id} of session ${session} covers no messages of its own (it only condensed earlier summaries).`
        : `Compaction summary ${args.entry_id} of session ${session} stands for these original messages, oldest first:`,
    );
  } else {
    out.line(`Compaction summary ${args.entry_id} of session ${session}, continued:`);
  }
  const shown = out.lines(entries.map((e) => entryText(e)));
  const nextToken = nextCursor(cursor, shown, entries.length, res.nextPageToken);
  if (nextToken) out.note(`More: call expand again with the same entry_id and page_token ${JSON.stringify(nextToken)}.`);
  else if (res.previousCompactionEntryId)
    out.note(`What came before is in the earlier summary ${res.previousCompactionEntryId}: expand it for those messages.`);
  return ok(out.text(), {
    kind: "compaction",
    entries: entries.slice(0, shown).map(entryData),
    next_page_token: nextToken,
    previous_compaction_entry_id: res.previousCompactionEntryId,
  });
}

/** A message entry by id: found by reading the transcript (at most MAX_SCAN_ENTRIES), shown with its neighbours. */
async function readEntry(client: ContextdClient, session: string, entryId: string, d: Bound): Promise<HistoryToolResult> {
  const before: TranscriptEntry[] = [];
  let found: TranscriptEntry | undefined;
  const after: TranscriptEntry[] = [];
  let pageToken = "";
  let read = 0;
  do {
    const page = await client.getTranscript({ session: { sessionId: session }, pageSize: SCAN_PAGE, pageToken }, callOptions(d));
    for (const e of page.entries) {
      if (e.entry?.$case !== "message") continue;
      if (!found) {
        if (e.id === entryId) found = e;
        else {
          before.push(e);
          if (before.length > 2) before.shift();
        }
      } else if (after.length < 2) after.push(e);
    }
    read += page.entries.length;
    pageToken = page.nextPageToken;
  } while (pageToken && (!found || after.length < 2) && read < MAX_SCAN_ENTRIES);
  if (!found)
    return failure(
      "entry_id",
      `No entry ${JSON.stringify(entryId)} in session ${session}${read >= MAX_SCAN_ENTRIES ? ` (only its first ${MAX_SCAN_ENTRIES} entries were read)` : ""}. Use an entry id from a search hit, with the hit's session as session_id.`,
    );
  const out = new Bounded(maxChars(d));
  out.line(`Entry ${entryId} of session ${session}:`);
  out.line(cut(entryText(found), Math.min(out.room(), ENTRY_CHARS * 2)));
  const neighbours = (es: TranscriptEntry[], label: string) => {
    if (!es.length || !out.fits(label)) return;
    out.line(label);
    for (const e of es) if (out.fits(entryText(e, 1000))) out.line(entryText(e, 1000));
  };
  neighbours(before, "Just before it:");
  neighbours(after, "Just after it:");
  return ok(out.text(), { kind: "message", entry: entryData(found), before: before.map(entryData), after: after.map(entryData) });
}

function entryText(e: TranscriptEntry, max = ENTRY_CHARS): string {
  const x = e.entry;
  let who = "entry";
  let body = "";
  if (x?.$case === "message") {
    who = isSummaryMessage(x.value) ? "summary" : roleName(x.value.role);
    body = messageBody(x.value);
  } else if (x?.$case === "compaction") {
    who = "compaction summary";
    body = x.value.summary;
  }
  const flags = e.hidden ? " · hidden (not in any context)" : "";
  return `--- entry ${e.id} · #${e.seq} · ${who} · ${iso(e.timestampMs)}${flags}\n${cut(body, max)}`;
}

function entryData(e: TranscriptEntry): Record<string, unknown> {
  const x = e.entry;
  return {
    entry_id: e.id,
    seq: e.seq,
    timestamp_ms: e.timestampMs,
    hidden: e.hidden,
    role: x?.$case === "message" ? roleName(x.value.role) : (x?.$case ?? ""),
    text: x?.$case === "message" ? cut(messageBody(x.value), ENTRY_CHARS) : x?.$case === "compaction" ? cut(x.value.summary, ENTRY_CHARS) : "",
  };
}

/**
 * The tools' page token: contextd's page token for the page being read ("" for the first) and how
 * many of that page's items were shown already. An answer cut short by maxChars resumes inside
 * contextd's page by asking for the same page again; contextd's own token inside stays sealed to
 * the caller and the request, so nothing here can be forged into reading more.
 */
interface Cursor {
  t: string;
  s: number;
}

function readCursor(token: string | undefined, tool: string): { ok: true; at: Cursor } | { ok: false; failure: HistoryToolResult } {
  if (!token) return { ok: true, at: { t: "", s: 0 } };
  try {
    const c = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as Partial<Cursor>;
    if (typeof c.t === "string" && Number.isSafeInteger(c.s) && (c.s as number) >= 0) return { ok: true, at: { t: c.t, s: c.s as number } };
  } catch {
    // not ours: said below
  }
  return { ok: false, failure: failure("page_token", `page_token is not one an earlier ${tool} answered: omit it to start from the first page.`) };
}

/** The token of the page after one that showed `shown` of its `count` remaining items ("" at the end). */
function nextCursor(at: Cursor, shown: number, count: number, serverNext: string): string {
  const next = shown < count ? { t: at.t, s: at.s + shown } : serverNext ? { t: serverNext, s: 0 } : undefined;
  return next ? Buffer.from(JSON.stringify(next)).toString("base64url") : "";
}

// ---- context ----------------------------------------------------------------------------------

async function context(client: ContextdClient, args: ContextInput, d: Bound): Promise<HistoryToolResult> {
  const session = requireSession(args.session_id, d);
  if (typeof session !== "string") return session;
  let from = 0;
  if (args.page_token) {
    from = /^m\d{1,7}$/.test(args.page_token) ? Number(args.page_token.slice(1)) : -1;
    if (from < 0) return failure("page_token", "page_token is not one an earlier context answered: omit it to start from the first message.");
  }
  const budget = args.token_budget ?? d.tokenBudget ?? DEFAULT_TOKEN_BUDGET;
  const { ctx, raw } = await previewContext(client, session, { budget, autoCompact: false, prompt: args.prompt, agentId: d.agentId }, callOptions(d));
  const s = ctx.sections;
  const out = new Bounded(maxChars(d));
  if (from === 0) {
    out.line(
      `What the model would be sent now for session ${session} with a budget of ${budget} tokens ` +
        `(engine ${ctx.engineId || "-"}, mode ${ctx.mode}${ctx.fallbackReason ? `: ${ctx.fallbackReason}` : ""}): ` +
        `${plural(ctx.messages.length, "message")}, ${s.totalTokens} tokens — summary ${s.summaryTokens}, messages ${s.messageTokens}, ` +
        `tool results ${s.toolResultTokens}, system prompt addition ${s.systemAdditionTokens}.`,
    );
    if (ctx.mode === "DEGRADED") out.line("It is over the budget: the next real turn would compact first.");
    if (ctx.systemPromptAddition.text)
      out.line(`--- system prompt addition · ${ctx.systemPromptAddition.tokens} tokens\n${cut(ctx.systemPromptAddition.text, ENTRY_CHARS)}`);
  } else out.line(`Session ${session}, budget ${budget} tokens, continued from message ${from + 1} of ${ctx.messages.length}:`);
  let next = 0;
  for (let i = from; i < ctx.messages.length; i++) {
    const m = ctx.messages[i];
    const what = m.section === "summary" ? "summary of compacted history (expand its entry id for the original messages)" : m.role;
    const text = `--- ${m.index} · ${what} · entry ${m.id || "-"} · ${m.tokens} tokens\n${cut(messageBody(raw[i]), ENTRY_CHARS)}`;
    if (!out.fits(text) && i > from) {
      next = i;
      break;
    }
    out.line(out.fits(text) ? text : cut(text, out.room()));
  }
  if (next) out.note(`${plural(ctx.messages.length - next, "more message")}: call context again with page_token "m${next}".`);
  return ok(out.text(), {
    session_id: session,
    budget,
    engine_id: ctx.engineId,
    mode: ctx.mode,
    estimated_tokens: ctx.estimatedTokens,
    sections: { ...s },
    messages: ctx.messages.slice(from, next || undefined).map((m) => ({ index: m.index, section: m.section, role: m.role, entry_id: m.id, tokens: m.tokens })),
    next_page_token: next ? `m${next}` : "",
  });
}

// ---- sessions ---------------------------------------------------------------------------------

async function sessions(client: ContextdClient, args: SessionsInput, d: Bound): Promise<HistoryToolResult> {
  const cursor = readCursor(args.page_token, "sessions");
  if (!cursor.ok) return cursor.failure;
  const res = await client.listSessions({ pageSize: args.limit ?? 20, pageToken: cursor.at.t }, callOptions(d));
  // A token may cover several agents; a caller bound to one agent shows that agent's only.
  const list = (d.agentId ? res.sessions.filter((s) => s.session?.agentId === d.agentId) : res.sessions).slice(cursor.at.s);
  const out = new Bounded(maxChars(d));
  out.line(list.length || res.nextPageToken ? "Sessions, most recently active first:" : args.page_token ? "No more sessions." : "No sessions.");
  const shown = out.lines(
    list.map((s) => {
      const ref = s.session;
      return (
        `- session ${ref?.sessionId ?? ""}${ref?.agentId ? ` · agent ${ref.agentId}` : ""}${ref?.sessionKey ? ` · key ${ref.sessionKey}` : ""}` +
        ` · ${plural(s.messageCount, "message")}, ${plural(s.compactionCount, "compaction")}, ${s.activeTokens} tokens in context of ${s.totalTokens} · last active ${iso(s.updatedAtMs)}`
      );
    }),
  );
  const next = nextCursor(cursor.at, shown, list.length, res.nextPageToken);
  if (next) out.note(`More sessions: call sessions again with page_token ${JSON.stringify(next)}.`);
  return ok(out.text(), {
    sessions: list.slice(0, shown).map((s) => ({
      session_id: s.session?.sessionId ?? "",
      agent_id: s.session?.agentId ?? "",
      session_key: s.session?.sessionKey ?? "",
      message_count: s.messageCount,
      compaction_count: s.compactionCount,
      active_tokens: s.activeTokens,
      total_tokens: s.totalTokens,
      updated_at_ms: s.updatedAtMs,
    })),
    next_page_token: next,
  });
}

// ---- shared -----------------------------------------------------------------------------------

/** Validates `input`, runs `fn`, and turns whatever fails into an error result. */
async function guarded<S extends z.ZodObject>(schema: S, input: unknown, fn: (args: z.infer<S>) => Promise<HistoryToolResult>): Promise<HistoryToolResult> {
  const parsed = schema.safeParse(input ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join(".") || "arguments";
    return failure(field, issue.code === "unrecognized_keys" ? `unknown argument ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}` : issue.message);
  }
  try {
    return await fn(parsed.data);
  } catch (err) {
    return contextdFailure(err);
  }
}

/** contextd's request fields, as the tools' arguments name them. */
const FIELD_NAMES: Record<string, string> = {
  query: "query",
  page_token: "page_token",
  page_size: "limit",
  compaction_entry_id: "entry_id",
  token_budget: "token_budget",
  prompt: "prompt",
  "session.session_id": "session_id",
  session_id: "session_id",
};

function contextdFailure(err: unknown): HistoryToolResult {
  const e = err as Partial<ServiceError>;
  if (typeof e.code !== "number") return failure(undefined, `the tool failed: ${err instanceof Error ? err.message : String(err)}`);
  const message = (e.details || e.message || "").trim();
  const field = errorDetails(err)?.fieldViolations[0]?.field;
  switch (e.code) {
    case status.INVALID_ARGUMENT:
      return failure(field ? (FIELD_NAMES[field] ?? field) : undefined, message);
    case status.NOT_FOUND:
      return failure("session_id", `${message}. Use a session id from the sessions tool (or omit session_id for the current session).`);
    case status.UNAVAILABLE:
      return failure(undefined, `contextd is unreachable (${message}); try again later.`);
    case status.DEADLINE_EXCEEDED:
      return failure(undefined, "contextd did not answer in time; try again, or ask for less (a smaller limit).");
    case status.RESOURCE_EXHAUSTED:
      return failure(undefined, `contextd is busy (${message}); try again shortly.`);
    case status.PERMISSION_DENIED:
    case status.UNAUTHENTICATED:
      return failure(undefined, `not allowed: ${message}`);
    default:
      return failure(undefined, `contextd failed: ${status[e.code] ?? e.code}: ${message}`);
  }
}

function failure(field: string | undefined, message: string): HistoryToolResult {
  return { text: field ? `Invalid argument ${field}: ${message}` : `Error: ${message}`, isError: true, data: { error: message, ...(field ? { field } : {}) } };
}

function ok(text: string, data: Record<string, unknown>): HistoryToolResult {
  return { text, isError: false, data };
}

function requireSession(given: string | undefined, d: HistoryToolDefaults): string | HistoryToolResult {
  return given ?? d.sessionId ?? failure("session_id", "no current session here: give a session_id (the sessions tool lists them).");
}

/** The binding's defaults with the call's signal. */
type Bound = HistoryToolDefaults & HistoryToolCall;

function callOptions(d: Bound): CallOptions {
  return { ...(d.timeoutMs ? { timeoutMs: d.timeoutMs } : {}), ...(d.signal ? { signal: d.signal } : {}) };
}

function maxChars(d: HistoryToolDefaults): number {
  return Math.max(1_000, d.maxChars ?? DEFAULT_MAX_CHARS);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function iso(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

/** `text` cut to `max` characters, saying how long it was. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = ` … [cut: ${text.length} characters in all]`;
  return text.slice(0, Math.max(0, max - marker.length)) + marker;
}

/** Lines joined by newlines, never more than `max` characters; a few are kept back for the closing notes. */
class Bounded {
  private readonly written: string[] = [];
  private used = 0;
  private static readonly NOTES = 400;

  constructor(private readonly max: number) {}

  room(): number {
    return Math.max(0, this.max - Bounded.NOTES - this.used - 1);
  }

  fits(line: string): boolean {
    return line.length <= this.room();
  }

  line(text: string): void {
    this.written.push(text);
    this.used += text.length + 1;
  }

  /**
   * As many of `items` as fit, in order; at least the first, cut to the room left, so that an item
   * longer than a whole answer still moves the reader on. Returns how many were written.
   */
  lines(items: string[]): number {
    let shown = 0;
    for (const item of items) {
      if (!this.fits(item)) {
        if (shown > 0) break;
        this.line(cut(item, this.room()));
      } else this.line(item);
      shown++;
    }
    return shown;
  }

  /** A closing note (page token, truncation): from the kept-back room. */
  note(text: string): void {
    this.line(cut(text, Math.max(0, this.max - this.used - 1)));
  }

  text(): string {
    return this.written.join("\n");
  }
}
