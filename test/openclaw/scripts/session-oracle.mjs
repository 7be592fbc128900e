// OpenClaw's own reading of session JSONL files, for test/openclaw/session-conformance.test.ts.
// Runs under Node 24 with the published `openclaw` package: `node session-oracle.mjs <packageDir>`.
// The repository has no openclaw dependency, so the SDK is imported by resolving the package's own
// `exports` map from packageDir (the subpath a plugin would import, openclaw/plugin-sdk/agent-sessions).
//
// Protocol: one JSON request per line on stdin, `{"id": n, "jsonl": "<file text>"}`; one JSON answer
// per line on fd 3 (stdout is OpenClaw's, which may log there): `{"id": n, "ok": true, ...}` with
//   messages  SessionManager.fromEntries(entries).buildSessionContext().messages, as JSON
//   branch    ids of getBranch() (the active branch, root first), leafId
//   entries   ids of getEntries() (recognised entries that take part in navigation)
//   opaque    ids of the rows the loader kept without recognising them
//   persisted the number of rows getPersistedEntries() would write back (one more than the file
//             when OpenClaw needs a `leaf` row to restore its own leaf)
// or `{"id": n, "ok": false, "error": "..."}` when OpenClaw cannot load the file.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const packageDir = process.argv[2];
if (!packageDir) throw new Error("usage: node session-oracle.mjs <openclaw packageDir>");
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8"));
const target = pkg.exports?.["./plugin-sdk/agent-sessions"];
const file = typeof target === "string" ? target : (target?.import ?? target?.default);
if (!file) throw new Error(`openclaw ${pkg.version} exports no ./plugin-sdk/agent-sessions`);
const { SessionManager, parseSessionEntries, migrateSessionEntries } = await import(pathToFileURL(path.join(packageDir, file)).href);

const out = fs.createWriteStream(null, { fd: 3 });
// Node 24's readline also ends lines at U+2028/U+2029, which JSON.stringify leaves raw: escape them.
const line = (v) =>
  `${JSON.stringify(v)
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029")}\n`;
const answer = (a) => out.write(line(a));
const idOf = (e) => (e && typeof e === "object" ? e.id : undefined);

function load(jsonl) {
  const entries = parseSessionEntries(jsonl);
  migrateSessionEntries(entries);
  const sm = SessionManager.fromEntries(entries);
  const context = sm.buildSessionContext();
  if (!Array.isArray(sm.opaqueFileEntries)) throw new Error("this OpenClaw keeps no opaqueFileEntries: update session-oracle.mjs");
  return {
    messages: JSON.parse(JSON.stringify(context.messages)),
    branch: sm.getBranch().map(idOf),
    leafId: sm.getLeafId(),
    entries: sm.getEntries().map(idOf),
    opaque: sm.opaqueFileEntries.map((o) => idOf(o.record) ?? null),
    persisted: sm.getPersistedEntries().length,
  };
}

answer({ ready: true, version: pkg.version, node: process.version });
for await (const request of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!request.trim()) continue;
  const { id, jsonl } = JSON.parse(request);
  try {
    answer({ id, ok: true, ...load(jsonl) });
  } catch (err) {
    answer({ id, ok: false, error: String(err?.stack ?? err) });
  }
}
out.end();
