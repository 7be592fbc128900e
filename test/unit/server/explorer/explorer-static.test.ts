import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CONTENT_SECURITY_POLICY, ExplorerFiles } from "../../../../src/server/explorer/explorer-static.js";

describe("ExplorerFiles", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "explorer-static-"));
  const root = path.join(dir, "explorer");
  mkdirSync(path.join(root, "assets"), { recursive: true });
  writeFileSync(path.join(root, "index.html"), "<!doctype html>");
  writeFileSync(path.join(root, "assets", "a.js"), "export {}");
  writeFileSync(path.join(root, ".env"), "SECRET=1");
  writeFileSync(path.join(dir, "secret.js"), "outside");
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("serves the page and its assets with their content types", async () => {
    const files = new ExplorerFiles(root);
    expect(await files.get("")).toMatchObject({ type: "text/html; charset=utf-8" });
    expect((await files.get("assets/a.js"))?.body.toString()).toBe("export {}");
  });

  it("serves nothing outside its root, no dot file, no unknown type", async () => {
    const files = new ExplorerFiles(root);
    for (const p of ["../secret.js", "assets/../../secret.js", ".env", "assets/.hidden.js", "/etc/passwd", "missing.js", "index.html\0.js", "x.txt"])
      expect(await files.get(p), p).toBeUndefined();
  });

  it("its CSP allows no inline script, no other host and no framing", () => {
    expect(CONTENT_SECURITY_POLICY).toContain("default-src 'none'");
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).toContain("frame-ancestors 'none'");
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe-inline|unsafe-eval|\*|https?:/);
  });
});
