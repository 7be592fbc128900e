/**
 * What each integration's README says it was tested with is what the tests run: for every peer
 * dependency of the package (contextd aside — it is this repository), the version installed here
 * satisfies the package's peer range, and the README names the peer, its range and that version.
 * A version bump that leaves the README or the range behind fails here.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import semver from "semver";
import { describe, expect, it } from "vitest";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const readJson = (p: string) => JSON.parse(fs.readFileSync(path.join(REPO, p), "utf8")) as { version: string; peerDependencies?: Record<string, string> };

describe.each(["ai-sdk", "openai-agents"])("integrations/%s", (name) => {
  const manifest = readJson(`integrations/${name}/package.json`);
  const readme = fs.readFileSync(path.join(REPO, `integrations/${name}/README.md`), "utf8").replace(/\s+/g, " ");
  const peers = Object.entries(manifest.peerDependencies ?? {}).filter(([peer]) => peer !== "contextd");

  it("names its peers", () => {
    expect(peers.length).toBeGreaterThan(0);
  });

  it.each(peers)("the installed %s satisfies the peer range %s, and the README states both", (peer, range) => {
    const installed = readJson(`node_modules/${peer}/package.json`).version;
    expect(semver.satisfies(installed, range), `${peer}@${installed} in ${range}`).toBe(true);
    expect(readme).toContain(`\`${peer}\``);
    expect(readme).toContain(range);
    expect(readme).toContain(installed);
  });
});
