/**
 * A TypeScript engine fixture as one ESM file that plain `node` runs (as a child process, or as an
 * `engines.managed` command): bundled once per test process with esbuild into a temp dir whose
 * `node_modules` is the repository's, so its packages resolve as they do for the tests.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** Returns a function that bundles `fixture` the first time it is called and answers the file's path. */
export function bundledFixture(fixture: string): () => Promise<string> {
  let bundled: Promise<string> | undefined;
  return () =>
    (bundled ??= (async () => {
      const name = path.basename(fixture, ".ts");
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `contextd-${name}-`));
      process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
      fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
      fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
      const outfile = path.join(dir, `${name}.js`);
      await build({
        entryPoints: [fixture],
        outfile,
        bundle: true,
        platform: "node",
        format: "esm",
        target: "node20",
        packages: "external",
        logLevel: "error",
      });
      return outfile;
    })());
}
