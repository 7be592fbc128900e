/**
 * A large, realistic OpenClaw session JSONL file (version 4), for the import-stall regression test
 * and for measuring. It looks like a long coding session: user turns, assistant turns with thinking,
 * text and tool calls, tool results of very different sizes, model and thinking-level changes,
 * custom entries and, every so often, a compaction whose summary heads the view. Lines are mostly
 * short (as in real files: most rows are small, a few tool outputs are large), so the file has many
 * lines for its size — the per-line cost is what stalled the server.
 *
 * Deterministic (a seeded PRNG): the same `targetBytes` and `seed` give the same file.
 */
export interface LargeSessionFile {
  text: string;
  /** Entries after the header. */
  entries: number;
}

export function largeSessionFile(targetBytes: number, seed = 1): LargeSessionFile {
  let state = seed >>> 0 || 1;
  const random = (): number => {
    // xorshift32: fast and good enough to vary sizes and shapes.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x1_0000_0000;
  };
  const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)];
  const words = [
    "the",
    "invoice",
    "rounding",
    "test",
    "fails",
    "because",
    "src",
    "total",
    "line",
    "we",
    "should",
    "check",
    "function",
    "returns",
    "value",
    "cents",
    "vat",
    "fix",
    "module",
    "error",
  ];
  const prose = (n: number): string => Array.from({ length: n }, () => pick(words)).join(" ");
  const t0 = Date.parse("2026-09-08T09:12:03.114Z");
  let clock = 0;
  const iso = () => new Date(t0 + (clock += 1 + Math.floor(random() * 5000))).toISOString();

  const lines: string[] = [JSON.stringify({ type: "session", version: 4, id: `big-${seed}`, timestamp: iso(), cwd: "/home/ana/src/billing-api" })];
  let bytes = lines[0].length + 1;
  let parent: string | null = null;
  let n = 0;
  let lastKept: string | null = null;
  const push = (row: Record<string, unknown>): string => {
    const id = `e${(n++).toString(36)}-${Math.floor(random() * 1e9).toString(36)}`;
    const line = JSON.stringify({ ...row, id, parentId: parent, timestamp: iso() });
    lines.push(line);
    bytes += line.length + 1;
    parent = id;
    return id;
  };

  push({ type: "model_change", provider: "anthropic", modelId: "claude-sonnet-4-5" });
  push({ type: "thinking_level_change", thinkingLevel: "medium" });
  while (bytes < targetBytes) {
    const userId = push({ type: "message", message: { role: "user", content: prose(4 + Math.floor(random() * 30)), timestamp: t0 + clock } });
    lastKept ??= userId;
    const calls = Math.floor(random() * 3);
    for (let c = 0; c < calls; c++) {
      const callId = `toolu_${n.toString(36)}_${c}`;
      push({
        type: "message",
        message: {
          role: "assistant",
          content: [
            { type: "thinking", thinking: prose(5 + Math.floor(random() * 20)), thinkingSignature: "ErUBCkYIBRgCIkDq5mQ0VJ7m8yQe0kqR2m8h3Wb3sZ5n" },
            { type: "toolCall", id: callId, name: "bash", arguments: { command: `grep -rn ${pick(words)} src` } },
          ],
          api: "anthropic-messages",
          provider: "anthropic",
          model: "claude-sonnet-4-5",
          usage: {
            input: 2870,
            output: 24,
            cacheRead: 0,
            cacheWrite: 0,
            totalTokens: 2894,
            cost: { input: 0.00861, output: 0.00036, cacheRead: 0, cacheWrite: 0, total: 0.00897 },
          },
          stopReason: "toolUse",
          timestamp: t0 + clock,
        },
      });
      // Most tool output is a line or two; now and then a file dump of a few KB.
      const output = random() < 0.05 ? prose(300 + Math.floor(random() * 600)) : prose(3 + Math.floor(random() * 25));
      push({
        type: "message",
        message: {
          role: "toolResult",
          toolCallId: callId,
          toolName: "bash",
          content: [{ type: "text", text: output }],
          details: { exitCode: 0 },
          isError: false,
          timestamp: t0 + clock,
        },
      });
    }
    push({
      type: "message",
      message: {
        role: "assistant",
        content: [{ type: "text", text: prose(5 + Math.floor(random() * 40)) }],
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        usage: {
          input: 3100,
          output: 80,
          cacheRead: 2048,
          cacheWrite: 0,
          totalTokens: 5228,
          cost: { input: 0.0093, output: 0.0012, cacheRead: 0.0006, cacheWrite: 0, total: 0.0111 },
        },
        stopReason: "stop",
        timestamp: t0 + clock,
      },
    });
    const r = random();
    if (r < 0.01 && lastKept) {
      push({ type: "compaction", summary: prose(60), firstKeptEntryId: lastKept, tokensBefore: 120_000 });
      lastKept = null;
    } else if (r < 0.03) push({ type: "custom", customType: "note", data: { turn: n } });
    else if (r < 0.04) push({ type: "model_change", provider: "anthropic", modelId: pick(["claude-sonnet-4-5", "claude-opus-4-1"]) });
  }
  return { text: `${lines.join("\n")}\n`, entries: lines.length - 1 };
}
