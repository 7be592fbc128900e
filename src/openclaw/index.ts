// contextd/openclaw: OpenClaw's message and session-file model mapped to contextd's contract,
// losslessly. Used by the host (ImportTranscript, ExportTranscript) and by runtimes such as the
// OpenClaw plugin (integrations/openclaw) that turn AgentMessages into contextd Messages and back.
export { fromContextdMessage, OPENCLAW_ROLES, toContextdMessage, type AgentMessage } from "./agent-message.js";
export { fromContentBlock, toContentBlock } from "./content-blocks.js";
export { jsonEqual, type Json, type JsonObject } from "./json.js";
export { OPENCLAW_MESSAGE_KEY_PREFIX, openclawMessageKey } from "./message-key.js";
export { bashExecutionText, branchSummaryText, compactionSummaryText } from "./render.js";
export { fromTranscriptEntry, toTranscriptEntry } from "./session-entries.js";
export {
  isSessionFile,
  parseSessionFile,
  READABLE_VERSIONS,
  serializeSessionFile,
  SESSION_VERSION,
  type SessionFile,
  type SessionFileLine,
} from "./session-file.js";
export { activeBranch, type ActiveBranch, type TreeEntry } from "./session-tree.js";
