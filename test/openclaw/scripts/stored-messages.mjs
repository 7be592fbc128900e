// OpenClaw's own reading of a session it stores, for the OpenClaw tests: the messages of the
// session's active branch, oldest first, as OpenClaw keeps them (tool call ids and tool results'
// `details` as they were written), each with its entry id — read through the same SDK a plugin uses
// (openclaw/plugin-sdk/session-transcript-runtime), under Node 24, with the OpenClaw home's
// environment (OPENCLAW_STATE_DIR and friends).
//
//   node stored-messages.mjs <packageDir> <agentId> <sessionKey> <sessionId>
//
// Prints one JSON array of {entryId, message} on fd 3 (stdout is OpenClaw's, which may log there).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, agentId, sessionKey, sessionId] = process.argv.slice(2);
if (!sessionId) throw new Error("usage: node stored-messages.mjs <packageDir> <agentId> <sessionKey> <sessionId>");
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8"));
const target = pkg.exports?.["./plugin-sdk/session-transcript-runtime"];
const file = typeof target === "string" ? target : (target?.import ?? target?.default);
if (!file) throw new Error(`openclaw ${pkg.version} exports no ./plugin-sdk/session-transcript-runtime`);
const runtime = await import(pathToFileURL(path.join(packageDir, file)).href);
const entries = await runtime.readVisibleSessionTranscriptMessageEntries({ agentId, sessionKey, sessionId });
const out = fs.createWriteStream(null, { fd: 3 });
out.end(JSON.stringify(entries.map((e) => ({ entryId: e.entryId, message: e.message }))), () => process.exit(0));
