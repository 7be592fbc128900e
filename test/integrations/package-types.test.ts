/**
 * What an application gets when it installs @contextd/ai-sdk or @contextd/openai-agents: each
 * package is packed with `npm pack` (after `npm run build`, which builds both) and unpacked into a
 * consumer project in a temp dir of its own, next to the peers it names (`ai`, `@ai-sdk/provider`,
 * `@openai/agents`, `zod`, `contextd` — links to this checkout's copies). The consumer's code
 * (test/fixtures/integration-consumer/consumer.ts) is compiled with TypeScript the way a Node ESM
 * project and a bundler project compile it, and the packed bundles are loaded with Node.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/contextd-process.js";

const run = promisify(execFile);
const PACKAGES = ["ai-sdk", "openai-agents"] as const;
/** The peers of the two packages, and the Node types an application compiles with. */
const PEERS = ["ai", "@ai-sdk/provider", "@openai/agents", "zod", "@types/node"];
const CONSUMER = path.join(REPO_ROOT, "test/fixtures/integration-consumer/consumer.ts");

let dir: string;
const packed = new Map<
  string,
  { files: string[]; manifest: { types?: string; main?: string; exports?: Record<string, { types?: string; import?: string }> } }
>();

beforeAll(async () => {
  for (const name of PACKAGES) {
    const built = path.join(REPO_ROOT, "integrations", name, `dist/types/${name}/src/index.d.ts`);
    if (!fs.existsSync(built)) throw new Error(`${built} is missing: run \`npm run build\` first (it builds the integrations)`);
  }
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-consumer-"));
  const modules = path.join(dir, "node_modules");
  for (const name of PACKAGES) {
    const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], { cwd: path.join(REPO_ROOT, "integrations", name) });
    const [report] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const into = path.join(modules, "@contextd", name);
    fs.mkdirSync(into, { recursive: true });
    await run("tar", ["-xzf", path.join(dir, report.filename), "-C", into, "--strip-components=1"]);
    packed.set(name, { files: report.files.map((f) => f.path), manifest: JSON.parse(fs.readFileSync(path.join(into, "package.json"), "utf8")) });
  }
  for (const peer of PEERS) {
    fs.mkdirSync(path.dirname(path.join(modules, peer)), { recursive: true });
    fs.symlinkSync(path.join(REPO_ROOT, "node_modules", peer), path.join(modules, peer), "dir");
  }
  fs.symlinkSync(REPO_ROOT, path.join(modules, "contextd"), "dir");
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  fs.mkdirSync(path.join(dir, "src"));
  fs.copyFileSync(CONSUMER, path.join(dir, "src/consumer.ts"));
});

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * Compiles the consumer with `options`; answers the errors, formatted, in the consumer and in the
 * two packages' declarations — those are checked in full (no skipLibCheck for them), the other
 * libraries only as far as the consumer uses them.
 */
function compile(options: ts.CompilerOptions): string[] {
  const program = ts.createProgram([path.join(dir, "src/consumer.ts")], {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    types: ["node"],
    skipLibCheck: false,
    ...options,
  });
  const ours = [path.join(dir, "src") + path.sep, path.join(dir, "node_modules/@contextd") + path.sep];
  const files = program.getSourceFiles().filter((f) => ours.some((p) => f.fileName.startsWith(p)));
  // The consumer saw the packed declarations of every module of both packages, not some other copy.
  for (const name of PACKAGES) {
    const declarations = packed.get(name)!.files.filter((f) => f.startsWith(`dist/types/${name}/`) && f.endsWith(".d.ts"));
    for (const d of declarations) expect(files.map((f) => f.fileName)).toContain(path.join(dir, "node_modules/@contextd", name, d));
  }
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...files.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)]),
  ];
  return diagnostics.map((d) => ts.formatDiagnostic(d, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => dir, getNewLine: () => "\n" }));
}

describe("the packed integration packages", () => {
  it("each tarball holds its bundle and a declaration per module, and package.json's types and exports name them", () => {
    for (const name of PACKAGES) {
      const { files, manifest } = packed.get(name)!;
      for (const f of ["dist/index.js", "README.md", "package.json"]) expect(files, `${name}: ${f}`).toContain(f);
      const sources = fs.readdirSync(path.join(REPO_ROOT, "integrations", name, "src")).filter((f) => f.endsWith(".ts"));
      for (const source of sources) expect(files, name).toContain(`dist/types/${name}/src/${source.replace(/\.ts$/, ".d.ts")}`);
      const types = `./dist/types/${name}/src/index.d.ts`;
      expect(manifest.types).toBe(types);
      expect(manifest.exports?.["."]).toEqual({ types, import: "./dist/index.js" });
    }
  });

  it("a Node ESM project (module NodeNext) gets every type: its code and the packages' declarations compile without an error, and misuse is rejected", () => {
    expect(compile({ module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext })).toEqual([]);
  });

  it("a bundler project (moduleResolution Bundler) gets every type as well", () => {
    expect(compile({ module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler })).toEqual([]);
  });

  it("the type check has teeth: the consumer with one misuse more does not compile", () => {
    const consumer = path.join(dir, "src/consumer.ts");
    const original = fs.readFileSync(consumer, "utf8");
    const misuse = ['new ContextdSession({ client, tokenBudget: "many" });', 'contextdMiddleware({ client, timeoutMs: "soon" });'];
    const withMisuse = original + "\n" + misuse.join("\n") + "\n";
    try {
      fs.writeFileSync(consumer, withMisuse);
      const errors = compile({ module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext });
      // One error on each line of misuse, and nowhere else.
      const lines = withMisuse.split("\n");
      const flagged = errors.map((e) => lines[Number(/^src\/consumer\.ts\((\d+),/.exec(e)?.[1]) - 1]);
      expect(flagged, errors.join("\n")).toEqual(misuse);
      for (const e of errors) expect(e).toMatch(/TS2322: Type 'string' is not assignable to type 'number'/);
    } finally {
      fs.writeFileSync(consumer, original);
    }
  });

  it("the packed bundles load in Node with the consumer's peers and export what their declarations declare", async () => {
    for (const name of PACKAGES) {
      const { stdout } = await run(
        process.execPath,
        ["--input-type=module", "-e", `const m = await import("@contextd/${name}"); console.log(JSON.stringify(Object.keys(m).sort()));`],
        {
          cwd: dir,
        },
      );
      const exported = JSON.parse(stdout) as string[];
      // The values the declarations export (types aside), from the packed index.d.ts.
      const index = path.join(dir, "node_modules/@contextd", name, `dist/types/${name}/src/index.d.ts`);
      const program = ts.createProgram([index], {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        noEmit: true,
        types: ["node"],
      });
      const checker = program.getTypeChecker();
      const declared = checker
        .getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(index)!)!)
        .filter((s) => (checker.getAliasedSymbol(s).flags & ts.SymbolFlags.Value) !== 0)
        .map((s) => s.name)
        .sort();
      expect(declared.length).toBeGreaterThan(3);
      expect(exported, name).toEqual(declared);
    }
  });
});
