import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ContextdClient, Role } from "contextd/client";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { startModelServer, type ModelServer } from "../../openclaw/helpers/model-server.js";

/** The example of integrations/langchain/README.md, run as written against contextd and the stand-in. */
let contextd: ContextdProcess;
let model: ModelServer;

beforeAll(async () => {
  model = await startModelServer();
  contextd = await startContextd();
});

afterAll(async () => {
  await contextd?.stop();
  await model?.close();
});

function readmeExample(): string {
  const readme = readFileSync(path.join(REPO_ROOT, "integrations/langchain/README.md"), "utf8");
  const block = /<!-- langchain-readme-test -->\n```ts\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error("integrations/langchain/README.md has no block marked <!-- langchain-readme-test -->");
  return block[1];
}

it("the README's ten-line example runs as written: the model answers and contextd holds the prompt and the answer", async () => {
  const code = readmeExample();
  expect(code.trim().split("\n").filter(Boolean)).toHaveLength(9);
  // Next to this test, so that its imports resolve as the test's do (the package by its name).
  const file = path.join(import.meta.dirname, `readme-example-${process.pid}.ts`);
  writeFileSync(file, code);
  process.env.CONTEXTD_ADDRESS = contextd.address;
  process.env.MODEL_BASE_URL = model.baseUrl;
  // ChatOpenAI needs a key; the stand-in takes any.
  process.env.OPENAI_API_KEY ??= "test-key";
  const log = vi.spyOn(console, "log").mockImplementation(() => {});
  try {
    await import(file);
    expect(log).toHaveBeenCalledWith("Understood.");
  } finally {
    log.mockRestore();
    rmSync(file, { force: true });
  }
  expect(model.requests().at(-1)?.body.model).toBe("my-model");
  const cx = new ContextdClient({ address: contextd.address });
  const entries = [];
  for await (const e of cx.transcript("readme-chat")) if (e.entry?.$case === "message") entries.push(e.entry.value);
  cx.close();
  expect(entries.map((m) => [m.role, m.content[0]?.block?.$case === "text" ? m.content[0].block.value.text : ""])).toEqual([
    [Role.ROLE_USER, "Hello!"],
    [Role.ROLE_ASSISTANT, "Understood."],
  ]);
});
