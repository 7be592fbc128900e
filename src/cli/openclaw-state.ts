import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { decompress } from "fzstd";

/**
 * The sessions of an OpenClaw deployment, read from its state directory (`OPENCLAW_STATE_DIR`,
 * default `~/.openclaw`) without OpenClaw: `contextctl import-openclaw` hands each to
 * ImportTranscript as the session JSONL file it would have been.
 *
 * - OpenClaw 2026.7+ keeps sessions in one SQLite database per agent,
 *   `agents/<agent>/agent/openclaw-agent.sqlite`: `session_windows` holds every transcript a session
 *   key has had (a rollover starts a new one; only listing `session_nodes` would miss the older
 *   ones), `transcript_events` one JSONL line per row in `seq` order — the header first —, as text
 *   or zstd-compressed (`event_zstd`; lines of 1 KiB and more usually are). A transcript moved to
 *   cold storage is read from its archive (`session_transcript_cold_archives`: in the database, or a
 *   `sessions/cold/<name>` file), zstd JSON lines of which the `event` records are its rows.
 *   Databases are opened read-only: a running Gateway is undisturbed (WAL), and nothing is migrated.
 * - Older versions (and installs upgraded without `openclaw doctor --fix`): `agents/<agent>/sessions/
 *   sessions.json` (session key → {sessionId, sessionFile}) beside `<sessionId>.jsonl` files, or
 *   `<state>/sessions/` in the single-agent layout (agent `main`); primary `*.jsonl` files no index
 *   names are sessions too (without a key).
 *
 * A session id found in both is read from SQLite (Doctor's import keeps ids). Deleted sessions
 * (OpenClaw's archives) are not read.
 */
export interface OpenClawSession {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  /** Whether it is its key's current transcript (false for one a rollover left behind). */
  current: boolean;
  source: "sqlite" | "sqlite-cold" | "jsonl";
  /** The session file's lines (header first), as OpenClaw wrote them. */
  lines(): string[];
}

export interface OpenClawState {
  sessions: OpenClawSession[];
  /** What could not be read (a database of another schema, an unreadable index), one line each. */
  problems: string[];
}

export function readOpenClawState(stateDir: string): OpenClawState {
  if (!fs.existsSync(stateDir) || !fs.statSync(stateDir).isDirectory()) {
    throw new Error(`${stateDir} is not an OpenClaw state directory (set --state-dir or OPENCLAW_STATE_DIR)`);
  }
  const problems: string[] = [];
  const sessions: OpenClawSession[] = [];
  const seen = new Set<string>();
  const agentsDir = path.join(stateDir, "agents");
  const agents = fs.existsSync(agentsDir)
    ? fs
        .readdirSync(agentsDir)
        .filter((a) => fs.statSync(path.join(agentsDir, a)).isDirectory())
        .sort()
    : [];
  for (const agentId of agents) {
    const db = path.join(agentsDir, agentId, "agent", "openclaw-agent.sqlite");
    if (fs.existsSync(db)) {
      try {
        for (const s of sqliteSessions(db, agentId, path.join(agentsDir, agentId, "sessions"))) {
          seen.add(s.sessionId);
          sessions.push(s);
        }
      } catch (err) {
        problems.push(`${db}: ${(err as Error).message}`);
      }
    }
  }
  const legacyDirs = agents.map((a) => ({ agentId: a, dir: path.join(agentsDir, a, "sessions") }));
  legacyDirs.push({ agentId: "main", dir: path.join(stateDir, "sessions") });
  for (const { agentId, dir } of legacyDirs) {
    for (const s of jsonlSessions(dir, agentId, problems)) {
      if (seen.has(s.sessionId)) continue;
      seen.add(s.sessionId);
      sessions.push(s);
    }
  }
  return { sessions, problems };
}

interface WindowRow {
  session_id: string;
  session_key: string;
  current: number;
  cold_storage: string | null;
  cold_name: string | null;
}

function sqliteSessions(file: string, agentId: string, sessionsDir: string): OpenClawSession[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]).map(String));
    for (const t of ["session_windows", "transcript_events"])
      if (!tables.has(t)) throw new Error(`no ${t} table: not a session database this contextctl knows`);
    const cold = tables.has("session_transcript_cold_archives");
    const rows = db
      .prepare(
        `SELECT w.session_id, w.session_key,
                (SELECT count(*) FROM session_nodes n WHERE n.session_key = w.session_key AND n.current_session_id = w.session_id) AS current,
                ${cold ? "c.storage" : "NULL"} AS cold_storage, ${cold ? "c.archive_name" : "NULL"} AS cold_name
         FROM session_windows w ${cold ? "LEFT JOIN session_transcript_cold_archives c ON c.session_id = w.session_id" : ""}
         ORDER BY w.created_at, w.session_id`,
      )
      .all() as WindowRow[];
    return rows.map((r) => ({
      agentId,
      sessionKey: r.session_key,
      sessionId: r.session_id,
      current: r.current > 0,
      source: r.cold_storage ? "sqlite-cold" : "sqlite",
      lines: () => (r.cold_storage ? coldLines(file, r, sessionsDir) : hotLines(file, r.session_id)),
    }));
  } finally {
    db.close();
  }
}

/** A transcript's rows, each line decoded (text, or zstd of the exact UTF-8 line). */
function hotLines(file: string, sessionId: string): string[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows = db.prepare("SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq").all(sessionId) as {
      event_json: string | null;
      event_zstd: Buffer | null;
    }[];
    return rows.map((row) => row.event_json ?? utf8(decompress(row.event_zstd!)));
  } finally {
    db.close();
  }
}

/** A cold transcript: zstd JSON lines of `{kind, row}` records, the `event` ones its rows. */
function coldLines(file: string, r: WindowRow, sessionsDir: string): string[] {
  let archive: Uint8Array;
  if (r.cold_storage === "sqlite") {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      archive = db.prepare("SELECT archive_blob FROM session_transcript_cold_archives WHERE session_id = ?").pluck().get(r.session_id) as Buffer;
    } finally {
      db.close();
    }
  } else {
    archive = fs.readFileSync(path.join(sessionsDir, "cold", path.basename(r.cold_name ?? "")));
  }
  const events: { seq: number; line: string }[] = [];
  for (const text of utf8(decompress(archive)).split("\n")) {
    if (!text.trim()) continue;
    const rec = JSON.parse(text) as { kind?: string; row?: { seq?: number; event_json?: string } };
    if (rec.kind === "event" && typeof rec.row?.event_json === "string") events.push({ seq: Number(rec.row.seq ?? events.length), line: rec.row.event_json });
  }
  return events.sort((a, b) => a.seq - b.seq).map((e) => e.line);
}

/** Sessions of a legacy `sessions` directory: those its index names, then primary files it does not. */
function jsonlSessions(dir: string, agentId: string, problems: string[]): OpenClawSession[] {
  if (!fs.existsSync(dir)) return [];
  const out: OpenClawSession[] = [];
  const named = new Set<string>();
  const index = path.join(dir, "sessions.json");
  if (fs.existsSync(index)) {
    try {
      const entries = JSON.parse(fs.readFileSync(index, "utf8")) as Record<string, { sessionId?: string; sessionFile?: string }>;
      for (const [sessionKey, entry] of Object.entries(entries)) {
        if (!entry?.sessionId) continue;
        const file = path.join(dir, entry.sessionFile ? path.basename(entry.sessionFile) : `${entry.sessionId}.jsonl`);
        if (!fs.existsSync(file)) continue;
        named.add(path.basename(file));
        out.push(fileSession(file, agentId, sessionKey, entry.sessionId, true));
      }
    } catch (err) {
      problems.push(`${index}: ${(err as Error).message}`);
    }
  }
  for (const name of fs.readdirSync(dir).sort()) {
    // Primary transcripts only: not OpenClaw's .reset., .deleted., .checkpoint. or trajectory files.
    if (!name.endsWith(".jsonl") || named.has(name) || /\.(reset|deleted|checkpoint|trajectory)\b/.test(name)) continue;
    out.push(fileSession(path.join(dir, name), agentId, "", name.slice(0, -".jsonl".length), false));
  }
  return out;
}

function fileSession(file: string, agentId: string, sessionKey: string, sessionId: string, current: boolean): OpenClawSession {
  return {
    agentId,
    sessionKey,
    sessionId,
    current,
    source: "jsonl",
    lines: () =>
      fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim() !== ""),
  };
}

function utf8(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}
