/**
 * The TypeScript misbehaving engine (test/engines/ts/misbehaving-engine.ts, built on the engine
 * SDK's `serveEngine`), compiled on demand with the project's TypeScript (together with the SDK
 * sources it imports) into node_modules/.cache/contextd-test-engines/<hash of the sources> of this
 * checkout. The cache lives and dies with the checkout: the compiled engine resolves its packages
 * from this checkout's node_modules, so a build kept outside it would outlive the clone it links to.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { trackTempDir } from "../../bench/harness/child-process.js";
import { REPO_ROOT } from "./contextd-process.js";

export const TS_ENGINE = path.join(REPO_ROOT, "test/engines/ts/misbehaving-engine.ts");

let tsCompiled: Promise<string> | undefined;

function listTs(dir: string, out: string[]): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) listTs(p, out);
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) out.push(p);
  }
}

/** A hash of everything the compiled engine depends on: the engine, src/**, tsconfig, TypeScript. */
function sourcesHash(): string {
  const files = [TS_ENGINE, path.join(REPO_ROOT, "tsconfig.json"), path.join(REPO_ROOT, "node_modules/typescript/package.json")];
  listTs(path.join(REPO_ROOT, "src"), files);
  const h = createHash("sha256");
  for (const f of files.sort()) {
    h.update(path.relative(REPO_ROOT, f));
    h.update("\0");
    h.update(fs.readFileSync(f));
    h.update("\0");
  }
  return h.digest("hex").slice(0, 16);
}

/**
 * Compiles test/engines/ts/misbehaving-engine.ts and the SDK sources it imports with the project's
 * TypeScript (a temp tsconfig extending ../../tsconfig.json, rootDir = the repo root) into
 * CACHE_ROOT/<hash>, once per process (and reused across processes while the sources do not
 * change). The output dir gets `package.json` `{"type":"module"}`; its imports resolve from the
 * checkout's node_modules, the first one up the tree. Resolves with the path of the compiled engine.
 */
/** Inside the checkout (see the module comment); node_modules/.cache is where build tools keep theirs. */
const CACHE_ROOT = path.join(REPO_ROOT, "node_modules/.cache/contextd-test-engines");

export function compileTsEngine(): Promise<string> {
  tsCompiled ??= doCompileTsEngine();
  return tsCompiled;
}

async function doCompileTsEngine(): Promise<string> {
  fs.mkdirSync(CACHE_ROOT, { recursive: true });
  const finalDir = path.join(CACHE_ROOT, sourcesHash());
  const entry = path.join(finalDir, "test/engines/ts/misbehaving-engine.js");
  const marker = path.join(finalDir, ".complete");
  if (fs.existsSync(marker) && fs.existsSync(entry)) return entry;

  pruneOldBuilds(finalDir);
  const buildDir = `${finalDir}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  fs.mkdirSync(buildDir, { recursive: true });
  const tsconfigPath = path.join(buildDir, "tsconfig.json");
  fs.writeFileSync(
    tsconfigPath,
    JSON.stringify(
      {
        extends: path.join(REPO_ROOT, "tsconfig.json"),
        compilerOptions: {
          rootDir: REPO_ROOT,
          outDir: buildDir,
          declaration: false,
          sourceMap: false,
          incremental: false,
          // The tsconfig lives in the temp dir: point type lookup at the repo's node_modules.
          typeRoots: [path.join(REPO_ROOT, "node_modules/@types")],
        },
        files: [TS_ENGINE],
        include: [],
      },
      null,
      2,
    ),
  );
  const tsc = path.join(REPO_ROOT, "node_modules/typescript/bin/tsc");
  let diagnostics = "";
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", tsconfigPath], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    diagnostics = `${e.stdout ?? ""}${e.stderr ?? ""}` || e.message;
  }
  fs.rmSync(tsconfigPath, { force: true });
  const builtEntry = path.join(buildDir, "test/engines/ts/misbehaving-engine.js");
  if (!fs.existsSync(builtEntry)) {
    fs.rmSync(buildDir, { recursive: true, force: true });
    throw new Error(`compiling ${TS_ENGINE} failed:\n${diagnostics}`);
  }
  if (diagnostics) {
    // tsc emits despite type errors; errors in code under construction elsewhere must not block the
    // engine tests (the repo's typecheck reports them), but say so.
    const ownErrors = diagnostics.split("\n").filter((l) => l.includes("misbehaving-engine.ts"));
    if (ownErrors.length > 0) {
      fs.rmSync(buildDir, { recursive: true, force: true });
      throw new Error(`type errors in the TS test engine:\n${diagnostics}`);
    }
    console.warn(`[engine-process] tsc reported errors outside the test engine (compiled anyway):\n${diagnostics}`);
  }
  fs.writeFileSync(path.join(buildDir, "package.json"), JSON.stringify({ type: "module", private: true }));
  fs.writeFileSync(path.join(buildDir, ".complete"), new Date().toISOString());
  try {
    fs.renameSync(buildDir, finalDir);
  } catch {
    // Another test process finished the same build first (or a broken leftover is in the way).
    if (!fs.existsSync(marker)) {
      fs.rmSync(finalDir, { recursive: true, force: true });
      try {
        fs.renameSync(buildDir, finalDir);
        return entry;
      } catch {
        // fall through: run from our own build dir
      }
      trackTempDir(buildDir);
      return builtEntry;
    }
    fs.rmSync(buildDir, { recursive: true, force: true });
  }
  return entry;
}

/** Removes builds of older sources (not touched for an hour), so the cache does not pile up. */
function pruneOldBuilds(keep: string): void {
  const cutoff = Date.now() - 3600_000;
  try {
    for (const name of fs.readdirSync(CACHE_ROOT)) {
      const p = path.join(CACHE_ROOT, name);
      if (p === keep) continue;
      try {
        if (fs.statSync(p).mtimeMs < cutoff) fs.rmSync(p, { recursive: true, force: true });
      } catch {
        // raced with another process: fine
      }
    }
  } catch {
    // best effort
  }
}
