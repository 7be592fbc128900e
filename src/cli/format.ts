import { status as Status, type ServiceError } from "@grpc/grpc-js";
import { EngineEventType, EngineHealth, type EngineEvent, type EngineStatus } from "../contract/gen/contextd/v1/registry.js";
import { bold, tone } from "./style.js";
import { displayWidth, drawTable, type Align } from "./table.js";
import { escapeUnsafe } from "../contract/unsafe-characters.js";
import { terminalCell, terminalText, writeStdout } from "./terminal-text.js";

export { writeOut } from "./terminal-text.js";

export type Cell = string | number;
export type { Align } from "./table.js";

/**
 * A table. Its layout is the same on a terminal and in a pipe (tests and scripts read the rows);
 * only colour differs: the header is bold when colour is on (style.ts), and cells may arrive
 * styled. Columns whose cells are all numbers are right-aligned unless `aligns` says otherwise;
 * numbers are printed with thousands separators.
 */
export function table(head: string[], rows: Cell[][], aligns?: Align[]): string {
  const colAligns: Align[] = head.map((_, i) => aligns?.[i] ?? (rows.length > 0 && rows.every((r) => typeof r[i] === "number") ? "right" : "left"));
  return drawTable(
    head.map(bold),
    rows.map((row) => row.map((c) => (typeof c === "number" ? num(c) : c))),
    colAligns,
  );
}

/** Printed width of a cell (colour codes take no room). */
export function cellWidth(c: Cell): number {
  return displayWidth(typeof c === "number" ? num(c) : c);
}

/**
 * Characters left for a table's last column (a text preview) when the other columns hold `rows`'
 * cells under `head` (`head` names every column, `rows` leave the last one out): on a terminal,
 * what its width leaves (at least 20); in a pipe, `fallback`, so that piped output does not depend
 * on the terminal of whoever ran it.
 */
export function lastColumnWidth(head: string[], rows: Cell[][], fallback: number): number {
  const columns = process.stdout.isTTY ? process.stdout.columns : undefined;
  if (!columns) return fallback;
  const widths = head.slice(0, -1).map((h) => h.length);
  for (const row of rows) widths.forEach((w, i) => (widths[i] = Math.max(w, cellWidth(row[i] ?? ""))));
  // cli-table3 draws "│ a │ b │": one border, then 3 characters around each column's content.
  const used = 1 + widths.reduce((sum, w) => sum + w + 3, 0) + 3;
  return Math.max(20, columns - used);
}

/** The "Examples:" block every command's --help ends with. */
export function examples(...lines: string[]): string {
  return `\nExample${lines.length > 1 ? "s" : ""}:\n${lines.map((l) => `  $ ${l}`).join("\n")}`;
}

/**
 * Resolves once everything written to `stream` so far has been handed to the OS. Writes are
 * queued in order, so an empty write's callback runs after all earlier ones; a stream that is
 * gone (the reader left) has nothing left to flush.
 */
export function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || !stream.writable) return Promise.resolve();
  return new Promise((resolve) => stream.write("", () => resolve()));
}

/** A two-column `key  value` listing without borders. */
export function keyValues(rows: [string, Cell][]): string {
  const width = Math.max(0, ...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${typeof v === "number" ? num(v) : v}`).join("\n");
}

export function num(n: number): string {
  return n.toLocaleString("en-US");
}

/** `part` as a percentage of `total`, one decimal (`-` when total is 0). */
export function pct(part: number, total: number): string {
  return total > 0 ? `${((part / total) * 100).toFixed(1)}%` : "-";
}

/** Milliseconds since the epoch as ISO 8601 (`-` for 0). */
export function iso(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : "-";
}

export function yesNo(b: boolean): string {
  return b ? "yes" : "no";
}

export { modeName } from "../sdk/message-text.js";

export function healthName(health: EngineHealth): string {
  return EngineHealth[health]?.replace(/^ENGINE_HEALTH_/, "") ?? String(health);
}

export function eventTypeName(type: EngineEventType): string {
  return EngineEventType[type]?.replace(/^ENGINE_EVENT_TYPE_/, "") ?? String(type);
}

/**
 * An engine's quarantine for people: `manual: REASON` for an operator's isolate (held until
 * `contextctl release`), `OPERATION: REASON` for an automatic one; `-` when not quarantined.
 */
export function quarantineText(e: Quarantinable): string {
  return terminalText(rawQuarantineText(e));
}

/** An engine (EngineStatus) or one of its instances (EngineInstance): what may be quarantined. */
export type Quarantinable = Pick<EngineStatus, "quarantine">;

/** quarantineText before escaping (for logfmt, which quotes and escapes itself). */
function rawQuarantineText(e: Quarantinable): string {
  const q = e.quarantine;
  if (!q) return "-";
  const what = q.manual ? "manual" : q.operation || "quarantined";
  return q.reason ? `${what}: ${q.reason}` : what;
}

/** Milliseconds since the epoch as the local time of day, `14:03:10`. */
export function clock(ms: number): string {
  return new Date(ms).toTimeString().slice(0, 8);
}

/**
 * What routing does with an engine, for the `state` column: `active` (its sessions' calls go to
 * it), or quarantined — its calls go to `legacy` — and until when: `quarantined (manual: REASON)`
 * (until `contextctl release`), `quarantined until 14:03:10 (OPERATION: REASON)` (the earliest
 * release, local time; a passing health check then releases it), or, past that time,
 * `quarantined until a health check passes (OPERATION: REASON)`. The health column alone cannot
 * say this: a quarantined engine's health checks may well pass. The same for one instance of it.
 */
export function engineState(e: Quarantinable, nowMs = Date.now()): string {
  const q = e.quarantine;
  if (!q) return "active";
  const why = quarantineText(e);
  if (q.manual) return `quarantined (${why})`;
  if (q.releaseAtMs > nowMs) return `quarantined until ${clock(q.releaseAtMs)} (${why})`;
  return `quarantined until a health check passes (${why})`;
}

/** A logfmt value: bare when it is a plain word, else JSON-quoted; unsafe characters escaped either way (as quote() does). */
function logfmt(value: string): string {
  return /^[^\s"=]+$/.test(value) ? terminalText(value) : escapeUnsafe(JSON.stringify(value));
}

/** One engine on one line, logfmt style: `ID owner=OWNER health=HEALTH quarantine=none|"manual: why"`. */
export function engineLine(e: EngineStatus): string {
  const q = e.quarantine ? rawQuarantineText(e) : "none";
  return `${terminalText(e.engineId)} owner=${logfmt(e.owner || "-")} health=${tone(healthName(e.health))} quarantine=${logfmt(q)}`;
}

/**
 * One WatchEngines event on one line: `ISO TYPE ID owner=… health=… quarantine=… message="…"
 * instance=…` (the instance it is about, when it is about one; `health` and `quarantine` are the
 * engine's).
 */
export function eventLine(ev: EngineEvent): string {
  const engine = ev.engine ? engineLine(ev.engine) : "-";
  const message = ev.message ? ` message=${logfmt(ev.message)}` : "";
  const instance = ev.instanceId ? ` instance=${logfmt(ev.instanceId)}` : "";
  return terminalCell(`${iso(ev.atMs)} ${tone(eventTypeName(ev.type))} ${engine}${message}${instance}`);
}

/** One line for an error: gRPC errors as `CODE: details`, others by message. */
export function errorText(err: unknown): string {
  if (isServiceError(err)) {
    const details = (err.details || err.message).replace(/\s*Resolution note:\s*$/, "").trim();
    return terminalText(`${Status[err.code] ?? err.code}: ${details}`);
  }
  return terminalText(err instanceof Error ? err.message : String(err));
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number" && "details" in err;
}

export function printJson(value: unknown): void {
  writeStdout(`${JSON.stringify(value, null, 2)}\n`);
}
