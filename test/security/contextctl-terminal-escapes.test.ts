/**
 * Issue 26 item 7: contextctl printed tenant text raw. `contextctl transcript` passed colour codes
 * from message content (`ESC[8m` hides the text after it; black on black hides it too), and
 * `contextctl session <id>` printed a right-to-left override from the id, reordering what follows.
 * A runtime (a tenant) writes that text; an operator reads it.
 *
 * A real contextd; the hostile session is written over real gRPC (ContextdClient); then the real
 * contextctl binary runs each command that prints tenant text (stdout and stderr piped, as from a
 * script, and once with FORCE_COLOR as on a colour terminal) and no character that acts on a
 * terminal may appear raw — only as its `\uXXXX` escape, which must be visible.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { registryClient } from "../helpers/registry-client.js";
import { run, type Run } from "../cli/run-contextctl.js";

/** Raw characters that act on a terminal (newline and tab are layout, and allowed). */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/u;

// Session ids and keys may not hold C0 controls (the server refuses them), but may hold C1
// controls (U+009B is an 8-bit CSI), bidi overrides and zero-width characters.
const SESSION_ID = "invoice-\u202Etxt.exe\u2066-\u009b8m-\u200b";
const SESSION_KEY = "key-\u202Eyek-\u2028-line";
const AGENT_ID = "agent-\u202E\u200f";
const HIDDEN =
  "visible \u001b[8mHIDDEN TEXT\u001b[0m after, bell\u0007, \u001b[30;40mblack on black\u001b[0m, \u202Eevil\u202C, \u001b]0;title\u0007, DEL\u007f";

/** The first raw terminal-acting character in `text`, with some context, or undefined. */
function firstRaw(text: string): string | undefined {
  const m = RAW.exec(text);
  return m ? `U+${m[0].codePointAt(0)!.toString(16).padStart(4, "0")} in ${JSON.stringify(text.slice(Math.max(0, m.index - 30), m.index + 30))}` : undefined;
}

describe("finding: contextctl printed control characters of tenant text raw", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let registry: ReturnType<typeof registryClient>;
  const ctl = (args: string[], env: Record<string, string> = {}): Promise<Run> => run(["--address", contextd.address, ...args], env);

  beforeAll(async () => {
    contextd = await startContextd();
    const cx = new ContextdClient({ address: contextd.address, timeoutMs: 20_000 });
    try {
      const session = { sessionId: SESSION_ID, sessionKey: SESSION_KEY, agentId: AGENT_ID };
      await cx.appendMessages({ session, messages: [user(HIDDEN), assistant(`answer with ${HIDDEN}`)] });
    } finally {
      cx.close();
    }
    // An engine quarantined with a hostile reason, for the engines commands.
    engine = await startTsEngine({ engineId: "hostile-eng" });
    registry = registryClient(contextd.address);
    const res = await registry.register({ engineId: "hostile-eng", owner: "acme", endpoint: engine.address, protocolVersions: [1] });
    expect(res.ok, res.message).toBe(true);
    await registry.isolate("hostile-eng", `reason ${HIDDEN}`);
  });
  afterAll(async () => {
    registry?.close();
    await engine?.stop();
    await contextd?.cleanup();
  });

  const commands: Array<[string, string[]]> = [
    ["transcript", ["transcript", SESSION_ID]],
    ["transcript --json", ["--json", "transcript", SESSION_ID]],
    ["session", ["session", SESSION_ID]],
    ["session --json", ["--json", "session", SESSION_ID]],
    ["sessions", ["sessions"]],
    ["sessions --json", ["--json", "sessions"]],
    ["context", ["context", SESSION_ID, "--budget", "4000"]],
    ["context --full", ["context", SESSION_ID, "--budget", "4000", "--full"]],
    ["context --json", ["--json", "context", SESSION_ID, "--budget", "4000"]],
    ["export (JSONL to stdout)", ["export", SESSION_ID]],
    ["export --json", ["--json", "export", SESSION_ID]],
    ["engines", ["engines"]],
    ["engines --json", ["--json", "engines"]],
    ["an error naming the id (NOT_FOUND)", ["session", `${SESSION_ID}-missing`]],
    ["a usage error echoing an argument", [`transcript\u202E\u001b[8m`]],
  ];

  it.each(commands)("contextctl %s prints no raw control, bidi or zero-width character, only their escapes", async (_name, args) => {
    const out = await ctl(args);
    expect(firstRaw(out.stdout), out.stdout).toBeUndefined();
    expect(firstRaw(out.stderr), out.stderr).toBeUndefined();
    // Something tenant-written was printed, escaped: the RLO of the id or text, or ESC of the text.
    expect(`${out.stdout}${out.stderr}`).toMatch(/\\u202e|\\u001b/i);
  });

  it("the escaped forms are visible: ESC[8m, BEL and U+202E of message text in transcript, U+202E of the id in session", async () => {
    const transcript = await ctl(["transcript", SESSION_ID, "--width", "400"]);
    expect(transcript.code, transcript.stderr).toBe(0);
    expect(transcript.stdout).toContain("visible \\u001b[8mHIDDEN TEXT\\u001b[0m after, bell\\u0007");
    expect(transcript.stdout).toContain("\\u202eevil\\u202c");
    const session = await ctl(["session", SESSION_ID]);
    expect(session.code, session.stderr).toBe(0);
    expect(session.stdout).toContain("invoice-\\u202etxt.exe\\u2066-\\u009b8m-\\u200b");
    // --json keeps the data: the escapes parse back to the very id.
    const json = await ctl(["--json", "session", SESSION_ID]);
    expect((JSON.parse(json.stdout) as { session: { sessionId: string } }).session.sessionId).toBe(SESSION_ID);
  });

  it("on a colour terminal (FORCE_COLOR) contextctl's own colours stay, a tenant's colour codes do not", async () => {
    for (const args of [["transcript", SESSION_ID], ["context", SESSION_ID, "--budget", "4000", "--full"], ["engines"]]) {
      const out = await ctl(args, { FORCE_COLOR: "1" });
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout).toContain("\u001b[1m"); // contextctl's bold header
      expect(out.stdout).not.toMatch(/\u001b\[(8|30;40|0)m|\u001b\]/);
      expect(out.stdout.replace(/\u001b\[(1|2|22|31|32|33|36|39)m/g, "")).not.toMatch(RAW);
    }
  });
});
