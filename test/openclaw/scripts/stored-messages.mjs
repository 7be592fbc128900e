// OpenClaw's own reading of a session it stores, for the OpenClaw tests: the messages of the
// session's active branch, oldest first, as OpenClaw keeps them (tool call ids and tool results'
// `details` as they were written), each with its entry id — read through the same SDK a plugin uses
// (openclaw/plugin-sdk/session-transcript-runtime), under Node 24, with the OpenClaw home's
// environment (OPENCLAW_STATE_DIR and friends).
//
//   node stored-messages.mjs <packageDir> <agentId> <sessionKey> <sessionId> [events]
//
// Prints one JSON array of {entryId, message} on fd 3 (stdout is OpenClaw's, which may log there);
// with `events`, the session file's rows instead (readSessionTranscriptEvents: header first, every
// entry of every branch), as OpenClaw's own reader returns them.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, agentId, sessionKey, sessionId, mode] = process.argv.slice(2);
if (!sessionId) throw new Error("usage: node stored-messages.mjs <packageDir> <agentId> <sessionKey> <sessionId>");
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8"));
const target = pkg.exports?.["./plugin-sdk/session-transcript-runtime"];
const file = typeof target === "string" ? target : (target?.import ?? target?.default);
if (!file) throw new Error(`openclaw ${pkg.version} exports no ./plugin-sdk/session-transcript-runtime`);
const runtime = await import(pathToFileURL(path.join(packageDir, file)).href);
const scope = { agentId, sessionKey, sessionId };
const result =
  mode === "events"
    ? await runtime.readSessionTranscriptEvents(scope)
    : (await runtime.readVisibleSessionTranscriptMessageEntries(scope)).map((e) => ({ entryId: e.entryId, message: e.message }));
const out = fs.createWriteStream(null, { fd: 3 });
out.end(JSON.stringify(result), () => process.exit(0));
