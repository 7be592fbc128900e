/**
 * Debian's Chromium (/usr/bin/chromium; scripts/test-prerequisites.sh installs it) driven by
 * playwright-core, headless, in a fresh profile, with no network of its own beyond what the page
 * asks: the explorer's browser tests. Collects what would show a broken or attacked page: uncaught
 * errors, console errors (a Content-Security-Policy violation is one) and dialogs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Browser {
  context: BrowserContext;
  /** A new tab with its problems recorded in `problems`. */
  page(): Promise<Page>;
  /** Uncaught errors, console errors and dialogs seen in any tab so far. */
  problems: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  // --user-data-dir is playwright's to pass: launchPersistentContext with a fresh directory.
  const profile = mkdtempSync(path.join(tmpdir(), "contextd-explorer-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  const problems: string[] = [];
  return {
    context,
    problems,
    async page() {
      const page = await context.newPage();
      page.on("pageerror", (err) => problems.push(`pageerror: ${err.message}`));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("dialog", (d) => {
        problems.push(`dialog: ${d.message()}`);
        void d.dismiss();
      });
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
