import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { CONTEXTCTL } from "./run-contextctl.js";

/**
 * Into a pipe, Node writes stdout asynchronously: a CLI that calls process.exit() as soon as its
 * command returns cuts whatever is still queued (64 KiB got through). Each command below prints
 * well over 1 MB through `| cat`, and must print exactly what it prints into a file.
 */
const sh = promisify(execFile);
const SESSION = "piped-big";

describe("contextctl writes all of its output into a pipe before it exits", () => {
  let server: ContextdProcess;
  let dir: string;

  beforeAll(async () => {
    server = await startContextd();
    dir = mkdtempSync(join(tmpdir(), "contextd-piped-"));
    const cx = new ContextdClient({ address: server.address });
    // 24 messages of ~60 KB: about 1.4 MB of text, all in the active view.
    for (let i = 0; i < 24; i++) {
      const text = `message ${i} ` + Array.from({ length: 10_000 }, (_, k) => `w${(i * 7919 + k) % 10007}`).join(" ");
      await cx.appendMessages({ session: { sessionId: SESSION }, messages: [textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, text)] });
    }
    cx.close();
  });
  afterAll(async () => {
    await server?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const commands: [string, string[]][] = [
    ["--json export", ["--json", "export", SESSION]],
    ["export (JSON Lines as they are)", ["export", SESSION]],
    ["--json context", ["--json", "context", SESSION, "--budget", "1000000"]],
    ["context --full", ["context", SESSION, "--budget", "1000000", "--full"]],
    ["--json transcript", ["--json", "transcript", SESSION]],
  ];
  it.each(commands)("%s: the whole answer, over 1 MB, comes through `| cat` with exit code 0", async (_name, args) => {
    const quoted = [process.execPath, CONTEXTCTL, "--address", server.address, ...args].map((a) => `'${a}'`).join(" ");
    const file = join(dir, `${args.join("_")}.out`);
    const piped = join(dir, `${args.join("_")}.piped`);
    // `set -o pipefail`: the pipeline's status is contextctl's, not cat's.
    await sh("bash", ["-c", `set -o pipefail; ${quoted} > '${file}' && ${quoted} | cat > '${piped}'`], { maxBuffer: 1 << 20 });
    const direct = readFileSync(file);
    expect(direct.length).toBeGreaterThan(1_000_000);
    expect(readFileSync(piped).equals(direct)).toBe(true);
    if (args[0] === "--json") {
      const text = direct.toString("utf8");
      if (args[1] === "transcript")
        expect(
          text
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as unknown),
        ).toHaveLength(24);
      else expect(() => JSON.parse(text) as unknown).not.toThrow();
    }
  });
});
