/**
 * Issue 26 item 7: secrets echoed at start-up. A raw token pasted into `token_sha256` (which wants
 * the token's sha256), a token-like value put into `token_env` (which wants the NAME of a variable)
 * by an environment override, and a store URL with a password were repeated in the start-up error;
 * an OTLP endpoint with `user:pass@` was logged verbatim in the "tracing on" line.
 *
 * The real contextd binary is started with each config (from the file and from `CONTEXTD_*`
 * overrides) and all of its stdout and stderr is scanned for the secret — whole, and its first
 * 12 characters (an error message cuts long values), in any letter case. The error must still name
 * the field.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runContextdUntilExit, startContextd, type StartContextdOptions } from "../helpers/contextd-process.js";

/** A GitHub-style token: letters of both cases and digits, and `_` (old env-name grammar passes it). */
const ghToken = () =>
  `ghp_${randomBytes(27)
    .toString("base64")
    .replace(/[^A-Za-z0-9]/g, "")}Aa1`;
/** An AWS-style access key id: upper-case letters and digits. */
const awsKey = () => `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
/** A base64url bearer token as contextctl makes them (may hold `-`). */
const bearer = () => `${randomBytes(32).toString("base64url")}-x`;

/**
 * Whatever of `secret` shows in `output`: the whole secret or its first 12 characters, in any
 * letter case (the old sha256 check echoed the value lower-cased).
 */
function leaks(output: string, secret: string): string[] {
  const text = output.toLowerCase();
  return [secret, secret.slice(0, 12)].filter((form) => text.includes(form.toLowerCase()));
}

async function startupOutput(opts: StartContextdOptions): Promise<{ code: number | null; output: string }> {
  const run = await runContextdUntilExit(opts);
  return { code: run.code, output: `${run.stdout}\n${run.stderr}` };
}

describe("finding: secrets in start-up errors and log lines", () => {
  const required = (runtime: Record<string, unknown>) => ({ auth: { required: true, runtimes: [runtime] } });

  it("a raw token in token_sha256 (config file or env override) is refused naming the field, never echoing the token", async () => {
    for (const token of [ghToken(), bearer()]) {
      const fromFile = await startupOutput({ config: required({ token_sha256: token }) });
      const fromEnv = await startupOutput({ config: { auth: { required: true } }, env: { CONTEXTD_AUTH__RUNTIMES__0__TOKEN_SHA256: token } });
      for (const run of [fromFile, fromEnv]) {
        expect(run.code).not.toBe(0);
        expect(run.output).toContain("auth.runtimes[0].token_sha256");
        expect(leaks(run.output, token)).toEqual([]);
      }
      expect(fromEnv.output).toContain("CONTEXTD_AUTH__RUNTIMES__0__TOKEN_SHA256");
    }
  });

  it("a token in the file is not echoed by any other config error either (an env override reading it as a section)", async () => {
    const token = ghToken();
    const run = await startupOutput({
      config: required({ token_sha256: token }),
      env: { CONTEXTD_AUTH__RUNTIMES__0__TOKEN_SHA256__X: "1" },
    });
    expect(run.code).not.toBe(0);
    expect(run.output).toContain("auth.runtimes[0].token_sha256");
    expect(leaks(run.output, token)).toEqual([]);
  });

  it("a token-like value in token_env (env override or file) is refused naming the field, never echoing the value", async () => {
    for (const token of [ghToken(), awsKey(), bearer()]) {
      const fromEnv = await startupOutput({ config: { auth: { required: true } }, env: { CONTEXTD_AUTH__RUNTIMES__0__TOKEN_ENV: token } });
      const fromFile = await startupOutput({ config: required({ token_env: token }) });
      const owner = await startupOutput({ config: { auth: { required: true } }, env: { CONTEXTD_AUTH__OWNERS: `{acme: {token_env: ${token}}}` } });
      for (const run of [fromEnv, fromFile, owner]) {
        expect(run.code).not.toBe(0);
        expect(run.output).toMatch(/token_env/);
        expect(leaks(run.output, token), token).toEqual([]);
      }
    }
  });

  it("URL credentials are not echoed in a config error (store, tracing.otlp_endpoint, summarizer base_url)", async () => {
    const password = `pw${randomBytes(12).toString("hex")}`;
    const runs = [
      await startupOutput({ env: { CONTEXTD_STORE: `mysql://admin:${password}@db.internal/contextd` } }),
      await startupOutput({ env: { CONTEXTD_STORE: `postgres://admin:${password}@db:notaport/contextd` } }),
      await startupOutput({ config: { tracing: { otlp_endpoint: `ftp://admin:${password}@collector:4318` } } }),
      await startupOutput({
        config: { compaction: { summarizer: { kind: "openai", base_url: `gopher://k:${password}@llm`, model: "m", api_key_env: "SOME_KEY" } } },
        env: { SOME_KEY: "x" },
      }),
    ];
    for (const run of runs) {
      expect(run.code).not.toBe(0);
      expect(run.output).toContain("config:");
      expect(leaks(run.output, password)).toEqual([]);
    }
  });

  it("an OTLP endpoint with user:pass@ (or ?api_key=) is logged without the secret in the 'tracing on' line (file and env override)", async () => {
    for (const how of ["file", "env", "query"] as const) {
      const password = `otlp${randomBytes(12).toString("hex")}`;
      const endpoint = how === "query" ? `http://127.0.0.1:9/?api_key=${password}` : `http://collector-user:${password}@127.0.0.1:9/`;
      const cd = await startContextd(
        how === "env" ? { env: { CONTEXTD_TRACING__OTLP_ENDPOINT: endpoint } } : { config: { tracing: { otlp_endpoint: endpoint } } },
      );
      try {
        const line = await cd.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("tracing on"));
        expect(line.otlp_endpoint).toBe(how === "query" ? "http://127.0.0.1:9/?api_key=***" : "http://collector-user:***@127.0.0.1:9/");
        await cd.stop();
        expect(leaks(cd.logs(), password)).toEqual([]);
      } finally {
        await cd.cleanup();
      }
    }
  });
});
