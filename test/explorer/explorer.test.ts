/**
 * The context explorer (/explorer/ on metrics_listen) in a real browser: Debian's Chromium driven by
 * playwright-core against a real contextd (auth required) with real TypeScript engine sidecars.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { SubagentContextMode } from "../../src/contract/gen/contextd/v1/types.js";
import { previewContext } from "../../src/sdk/assembled-context.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, system, toolCall, toolResult, user } from "../fixtures/messages.js";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { registryClient } from "../helpers/registry-client.js";
import { launchBrowser, type Browser } from "./browser.js";

const OPERATOR = "explorer-operator-token";
const RUNTIME = "explorer-runtime-token"; // agents team-*
const OTHER = "explorer-other-token"; // agent other
const OWNER = "explorer-owner-token";

/** Markup, script and terminal escapes a tenant controls: must show as text, run nothing. */
const XSS_ID = `s-<img src=x onerror="window.__pwned=1">"'`;
const XSS_TEXT = `<script>window.__pwned=2</script><img src=x onerror="window.__pwned=3"> \u001b[2J\u001b[31mRED\u001b[0m \u202Eevil`;
const XSS_REASON = `<img src=x onerror="window.__pwned=4"><script>window.__pwned=5</script>`;
const SCREENSHOTS = process.env.EXPLORER_SCREENSHOTS ? path.join(REPO_ROOT, "docs") : undefined;

describe("context explorer in Chromium", () => {
  let contextd: ContextdProcess;
  let base: string;
  let spy: EngineProcess;
  let doomed: EngineProcess;
  let browser: Browser;
  const rt = () => new ContextdClient({ address: contextd.address, token: RUNTIME, timeoutMs: 30_000 });

  beforeAll(async () => {
    contextd = await startContextd({
      env: { EXP_OPERATOR: OPERATOR, EXP_RUNTIME: RUNTIME, EXP_OTHER: OTHER, EXP_OWNER: OWNER },
      config: {
        explorer: { enabled: true },
        auth: {
          required: true,
          operators: [{ token_env: "EXP_OPERATOR", name: "ops" }],
          runtimes: [
            { token_env: "EXP_RUNTIME", name: "team", agents: ["team-*"] },
            { token_env: "EXP_OTHER", name: "other", agents: ["other"] },
          ],
          owners: { team: { token_env: "EXP_OWNER", engines: ["spy", "doomed"] } },
        },
        slots: { agents: { "team-a": "spy", "team-b": "doomed" } },
        engines: { health: { interval: "500ms", timeout: "400ms", unhealthy_threshold: 1 } },
        compaction: { keep_recent_tokens: 40 },
      },
    });
    base = `http://${contextd.metricsAddress}/explorer/`;
    spy = await startTsEngine({ engineId: "spy", registry: contextd.address, owner: "team", ownerToken: OWNER });
    doomed = await startTsEngine({ engineId: "doomed", registry: contextd.address, owner: "team", ownerToken: OWNER });
    expect((await spy.registered).ok).toBe(true);
    expect((await doomed.registered).ok).toBe(true);

    const cx = rt();
    // A session with a system message, a tool call and its result, a compaction, and a subagent.
    const talk = [
      system("You are a careful assistant."),
      user("Please read the file src/a.ts and tell me what it exports, in detail."),
      assistant("Let me look.", [toolCall("call_1", "read_file", { path: "src/a.ts" })]),
      toolResult("call_1", "read_file", "export const a = 1; export const b = 2; export function c() { return a + b; }"),
      assistant("It exports a, b and c: two constants and a function adding them."),
      user("Now summarise the whole conversation so far, please, with every detail you remember."),
    ];
    await cx.appendMessages({ session: { sessionId: "s-plain", agentId: "team-c" }, messages: talk });
    const compacted = await cx.compact({ session: { sessionId: "s-plain" }, tokenBudget: 150, force: true });
    expect(compacted.compacted, compacted.reason).toBe(true);
    await cx.appendMessages({ session: { sessionId: "s-plain" }, messages: [assistant("Here is the summary you asked for."), user("Thanks. Next step?")] });
    await cx.prepareSubagentSpawn({
      parent: { sessionId: "s-plain" },
      child: { sessionId: "s-plain-child", agentId: "team-a" },
      contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED,
    });
    await cx.appendMessages({ session: { sessionId: "s-plain-child" }, messages: [user("child task")] });
    // Tenant text that is markup, script and terminal escapes: in the id, the agent, the messages, a tool.
    await cx.appendMessages({
      session: { sessionId: XSS_ID, agentId: "team-<b>x</b>" },
      messages: [
        user(XSS_TEXT),
        assistant(XSS_TEXT, [toolCall(`c<i>1</i>`, `<svg onload="window.__pwned=6">`, {})]),
        toolResult(`c<i>1</i>`, "<b>t</b>", XSS_TEXT),
      ],
    });
    cx.close();
    const other = new ContextdClient({ address: contextd.address, token: OTHER });
    await other.appendMessages({ session: { sessionId: "s-other", agentId: "other" }, messages: [user("not for team eyes")] });
    other.close();
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await spy?.stop().catch(() => undefined);
    await doomed?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  beforeEach(() => {
    browser.problems.length = 0;
  });

  /** Drops the expected problems matching `pattern` (a refusal the test asked for). */
  function forgive(pattern: RegExp): void {
    const kept = browser.problems.filter((p) => !pattern.test(p));
    browser.problems.splice(0, browser.problems.length, ...kept);
  }

  /** Opens `hash` with `token` (typed into the header's form, as a person would). */
  async function open(hash: string, token: string): Promise<Page> {
    const page = await browser.page();
    await page.goto(`${base}#${hash}`);
    // Before a token is given, the API answers 401 (the browser logs the failed fetch): expected.
    await page.getByRole("alert").filter({ hasText: "missing" }).waitFor();
    forgive(/status of 401/);
    await page.getByLabel("Token", { exact: true }).fill(token);
    await page.getByRole("button", { name: "Use" }).click();
    await page
      .locator(".who")
      .filter({ hasText: /operator|runtime token/ })
      .waitFor();
    return page;
  }

  it("the Sessions, Session and Engines pages load without an error, a CSP violation or a dialog", async () => {
    const page = await open("/sessions", OPERATOR);
    await page.getByRole("link", { name: "s-plain", exact: true }).waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, "explorer-sessions.png"), fullPage: true });
    await page.getByRole("link", { name: "s-plain", exact: true }).click();
    await page.locator("ul.legend").waitFor();
    await page.locator("ol.compactions li").first().waitFor();
    await page.locator("ul.tree").getByRole("link", { name: "s-plain-child" }).waitFor();
    // A budget the picture can show: the free segment then leaves room for the others.
    await page.getByLabel("Budget (tokens)").fill("160");
    await page.getByRole("button", { name: "Preview" }).click();
    await page.waitForFunction(() => {
      const total = Number(document.querySelector("ul.legend")?.getAttribute("data-total"));
      return document.querySelector('ul.legend li[data-segment="free"]')?.getAttribute("data-tokens") === String(Math.max(0, 160 - total));
    });
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, "explorer-session.png"), fullPage: true });
    await page.getByRole("link", { name: "Engines" }).click();
    await page.locator('tr[data-engine="spy"]').waitFor();
    await page.locator(".live.on").waitFor();
    // Assemble latency from contextd's metrics: legacy has answered the sessions' Assembles.
    expect(await page.locator('tr[data-engine="legacy"] td').nth(8).innerText()).toMatch(/^[\d.]+ \/ [\d.]+ ms$/);
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it("the context bar's segments add up to what Assemble answered, for the budget the viewer sets", async () => {
    const page = await open("/session/s-plain", RUNTIME);
    await page.getByLabel("Budget (tokens)").fill("5000");
    await page.getByRole("button", { name: "Preview" }).click();
    const legend = page.locator("ul.legend[data-total]");
    await legend.waitFor();
    await page.waitForFunction(() => document.querySelector("ul.legend li[data-segment=free]")?.getAttribute("data-tokens") !== null);
    const read = async () =>
      page.evaluate(() => {
        const items = [...document.querySelectorAll("ul.legend li")].map(
          (li) => [li.getAttribute("data-segment"), Number(li.getAttribute("data-tokens"))] as const,
        );
        return { total: Number(document.querySelector("ul.legend")?.getAttribute("data-total")), items: Object.fromEntries(items) as Record<string, number> };
      });
    // The bar answers for 5000: wait until the free segment says so.
    const cx = rt();
    const direct = await cx.assemble({ session: { sessionId: "s-plain" }, tokenBudget: 5000, autoCompact: false });
    const { ctx } = await previewContext(cx, "s-plain", { budget: 5000, autoCompact: false });
    cx.close();
    await page.waitForFunction(
      (free) => document.querySelector("ul.legend li[data-segment=free]")?.getAttribute("data-tokens") === String(free),
      5000 - ctx.sections.totalTokens,
    );
    const bar = await read();
    const used = bar.items.pinned + bar.items.summary + bar.items.history + bar.items.recalled + bar.items.addition;
    expect(used).toBe(bar.total);
    expect(used).toBe(ctx.sections.totalTokens);
    // Assemble's own count of its messages, plus the system prompt addition.
    expect(used).toBe(direct.estimatedTokens + ctx.systemPromptAddition.tokens);
    expect(bar.items.free).toBe(5000 - used);
    expect(bar.items.summary).toBeGreaterThan(0);
    expect(bar.items.pinned).toBeGreaterThan(0);
    // One row per assembled message, each with its tokens.
    await expect.poll(() => page.locator("tr.msg").count()).toBe(direct.messages.length);
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it("a runtime token sees only its agents' sessions; an operator sees every session", async () => {
    const team = await open("/sessions", RUNTIME);
    await team.getByRole("link", { name: "s-plain", exact: true }).waitFor();
    expect(await team.getByRole("link", { name: "s-other" }).count()).toBe(0);
    const op = await open("/sessions", OPERATOR);
    await op.getByRole("link", { name: "s-other" }).waitFor();
    // A session of another tenant, asked for by id, is not there for the team's token.
    const res = await fetch(`${base}api/sessions/s-other`, { headers: { authorization: `Bearer ${RUNTIME}` } });
    expect(res.status).toBe(404);
    const anon = await fetch(`${base}api/sessions`);
    expect(anon.status).toBe(401);
    await team.close();
    await op.close();
  });

  it("search across history answers from SearchTranscript", async () => {
    const page = await open("/sessions", RUNTIME);
    await page.getByRole("link", { name: "s-plain", exact: true }).waitFor();
    await page.getByLabel("Search history").fill("careful");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("region", { name: "search results" }).getByRole("link", { name: "s-plain" }).first().waitFor();
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it("tenant markup, script and terminal escapes in ids, messages, tools and engine reasons render as text and run nothing", async () => {
    const reg = registryClient(contextd.address);
    await reg.isolate("spy", XSS_REASON, OPERATOR);
    const page = await open("/sessions", OPERATOR);
    const link = page.getByRole("link", { name: XSS_ID });
    await link.waitFor();
    await link.click();
    await page.locator("tr.msg").first().waitFor();
    await page.locator("ol.transcript li").first().waitFor();
    const text = await page.locator("main").innerText();
    expect(text).toContain(XSS_ID);
    expect(text).toContain("<script>window.__pwned=2</script>");
    expect(text).toContain(`<svg onload="window.__pwned=6">`);
    expect(text).toContain("team-<b>x</b>");
    await page.getByRole("link", { name: "Engines" }).click();
    await page.locator('tr[data-engine="spy"][data-state="quarantined"]').waitFor();
    expect(await page.locator('tr[data-engine="spy"] .reason').innerText()).toContain(XSS_REASON);
    const injected = await page.evaluate(() => ({
      pwned: (window as unknown as { __pwned?: number }).__pwned,
      elements: document.querySelectorAll("main img, main script, main svg[onload], main b:not(.kind) + img, main i").length,
    }));
    expect(injected).toEqual({ pwned: undefined, elements: 0 });
    expect(browser.problems).toEqual([]);
    await reg.clear("spy", OPERATOR);
    reg.close();
    await page.close();
  });

  it("an operator's isolate and release work behind a confirmation; a runtime token's are refused", async () => {
    const reg = registryClient(contextd.address);
    const asTeam = await open("/engines", RUNTIME);
    const row = asTeam.locator('tr[data-engine="spy"]');
    await row.waitFor();
    await row.getByRole("button", { name: "Isolate…" }).click();
    await asTeam.getByLabel("Reason").fill("checking");
    await asTeam.getByRole("button", { name: "Confirm" }).click();
    await asTeam.getByRole("alert").filter({ hasText: "isolate refused" }).waitFor();
    expect((await reg.get("spy", OPERATOR)).quarantine).toBeUndefined();
    forgive(/status of 403/);
    // Compacting a session is an operator action too.
    const refused = await fetch(`${base}api/info`, { headers: { authorization: `Bearer ${RUNTIME}` } }).then((r) => r.json() as Promise<{ csrfToken: string }>);
    const compact = await fetch(`${base}api/sessions/s-plain/compact`, {
      method: "POST",
      headers: { authorization: `Bearer ${RUNTIME}`, "content-type": "application/json", "x-csrf-token": refused.csrfToken },
      body: JSON.stringify({ budget: 100 }),
    });
    expect(compact.status).toBe(403);

    const asOps = await open("/engines", OPERATOR);
    const opsRow = asOps.locator('tr[data-engine="spy"]');
    await opsRow.getByRole("button", { name: "Isolate…" }).click();
    // Cancel first: nothing happens without the confirmation.
    await asOps.getByRole("button", { name: "Cancel" }).click();
    expect((await reg.get("spy", OPERATOR)).quarantine).toBeUndefined();
    await opsRow.getByRole("button", { name: "Isolate…" }).click();
    await asOps.getByLabel("Reason").fill("maintenance window");
    await asOps.getByRole("button", { name: "Confirm" }).click();
    await asOps.locator('tr[data-engine="spy"][data-state="quarantined"]').waitFor();
    expect((await reg.get("spy", OPERATOR)).quarantine?.reason).toBe("maintenance window");
    // The team's open page hears it live.
    await asTeam.locator('tr[data-engine="spy"][data-state="quarantined"]').waitFor();
    await asOps.locator('tr[data-engine="spy"]').getByRole("button", { name: "Release…" }).click();
    await asOps.getByRole("button", { name: "Confirm" }).click();
    await asOps.locator('tr[data-engine="spy"][data-state="active"]').waitFor();
    expect((await reg.get("spy", OPERATOR)).quarantine).toBeUndefined();
    expect(browser.problems).toEqual([]);
    reg.close();
    await asTeam.close();
    await asOps.close();
  });

  it("an action without the CSRF token, or from another origin, is refused and changes nothing", async () => {
    const reg = registryClient(contextd.address);
    const info = (await fetch(`${base}api/info`, { headers: { authorization: `Bearer ${OPERATOR}` } }).then((r) => r.json())) as { csrfToken: string };
    const post = (headers: Record<string, string>) =>
      fetch(`${base}api/engines/spy/isolate`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json", ...headers },
        body: JSON.stringify({ reason: "csrf" }),
      });
    expect((await post({})).status).toBe(403);
    expect((await post({ "x-csrf-token": "forged" })).status).toBe(403);
    expect((await post({ "x-csrf-token": info.csrfToken, origin: "http://evil.example" })).status).toBe(403);
    expect((await post({ "x-csrf-token": info.csrfToken, "sec-fetch-site": "cross-site" })).status).toBe(403);
    // Another credential's token does not fit this one.
    const other = (await fetch(`${base}api/info`, { headers: { authorization: `Bearer ${RUNTIME}` } }).then((r) => r.json())) as { csrfToken: string };
    expect((await post({ "x-csrf-token": other.csrfToken })).status).toBe(403);
    expect((await reg.get("spy", OPERATOR)).quarantine).toBeUndefined();
    reg.close();
  });

  it("bad input answers 4xx naming the field or limit, and the page and API carry the CSP", async () => {
    const auth = { authorization: `Bearer ${OPERATOR}` };
    const ask = async (url: string, init: RequestInit = {}) => {
      const res = await fetch(`${base}${url}`, { ...init, headers: { ...auth, ...(init.headers as Record<string, string>) } });
      return { status: res.status, body: (await res.json()) as { code: string; message: string } };
    };
    expect(await ask("api/sessions?pageSize=0")).toMatchObject({ status: 400, body: { message: expect.stringContaining("pageSize") } });
    expect(await ask("api/sessions/s-plain/context?budget=abc")).toMatchObject({ status: 400, body: { message: expect.stringContaining("budget") } });
    expect(await ask("api/sessions/%E0%A4%A/transcript")).toMatchObject({ status: 400, body: { message: expect.stringContaining("malformed") } });
    expect(await ask("api/nowhere")).toMatchObject({ status: 404 });
    const { csrfToken } = (await ask("api/info")).body as unknown as { csrfToken: string };
    const big = await ask("api/engines/spy/isolate", {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrfToken },
      body: JSON.stringify({ reason: "x".repeat(20_000) }),
    });
    expect(big).toMatchObject({ status: 413, body: { message: expect.stringContaining("16384 bytes") } });
    const page = await fetch(base);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(await page.text()).not.toMatch(/<script>|<script [^>]*>[^<]/);
    const api = await fetch(`${base}api/info`);
    expect(api.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(api.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("a quarantine made by killing a sidecar shows up live on the Engines page", async () => {
    const page = await open("/engines", OPERATOR);
    await page.locator('tr[data-engine="doomed"][data-state="active"]').waitFor();
    await page.locator(".live.on").waitFor();
    await doomed.kill9();
    // No reload: the row changes from WatchEngines' events.
    await page.locator('tr[data-engine="doomed"][data-state="quarantined"]').waitFor({ timeout: 30_000 });
    expect(await page.locator('tr[data-engine="doomed"] .state').innerText()).toMatch(/quarantined/);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, "explorer-engines.png"), fullPage: true });
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it("axe-core finds no serious or critical accessibility violation on the three pages", async () => {
    const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    const page = await open("/sessions", OPERATOR);
    const check = async (ready: string) => {
      await page.locator(ready).first().waitFor();
      // Evaluated through the DevTools protocol: the page's CSP (no inline script) still holds for the page itself.
      await page.evaluate(axeSource);
      const result = await page.evaluate(async () => {
        const axe = (
          window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> } }
        ).axe;
        const r = await axe.run(document, { resultTypes: ["violations"] });
        return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
      });
      return result.filter((v) => v.impact === "serious" || v.impact === "critical");
    };
    expect(await check("table.sessions tbody tr")).toEqual([]);
    await page.getByRole("link", { name: "s-plain", exact: true }).click();
    expect(await check("tr.msg")).toEqual([]);
    await page.getByRole("link", { name: "Engines" }).click();
    expect(await check('tr[data-engine="spy"]')).toEqual([]);
    await page.close();
  });
});
