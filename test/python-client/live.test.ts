/**
 * contextd.Client and contextd.AsyncClient (clients/python) against a real contextd: auth on with a
 * runtime token, then TLS and mTLS with certificates made in the test. Each case runs
 * test/python/client_checks.py CHECK under Debian's /usr/bin/python3 once per client (the checks are
 * written once and run against either) and asserts on the JSON it prints: the same for both.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { lastJsonLine, requirePythonGrpc, runPython } from "../helpers/python.js";
import { createPki, type CertFiles, type Pki } from "../security/helpers/test-pki.js";

const TOKEN = "py-live-runtime-token-0123456789";
const AUTH = { auth: { required: true, runtimes: [{ token_env: "PY_LIVE_TOKEN" }] } };

type Refusal = {
  code: string;
  method: string;
  message: string;
  text: string;
  reason: string;
  metadata: Record<string, string>;
  field_violations: [string, string][];
};

let sessions = 0;

const KINDS = ["Client", "AsyncClient"] as const;
type Kind = (typeof KINDS)[number];

/** Runs one check with a fresh session id; fails the test with the script's output unless it exits 0. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the script's JSON report, which each test reads field by field
async function check(kind: Kind, name: string, address: string, env: Record<string, string> = {}): Promise<Record<string, any>> {
  const session = `py-${name}-${++sessions}`;
  const run = await runPython("test/python/client_checks.py", [name, address, session, kind], { CONTEXTD_RUNTIME_TOKEN: TOKEN, ...env });
  expect(run.code, `${name}:\n${run.stderr}${run.stdout}`).toBe(0);
  return lastJsonLine(run.stdout)!;
}

beforeAll(() => requirePythonGrpc());

describe.each(KINDS)("contextd.%s against contextd with auth on", (kind) => {
  let cd: ContextdProcess;
  beforeAll(async () => {
    // A short kept tail, so that a forced Compact of a few turns (the search check) has something to fold.
    cd = await startContextd({ config: { ...AUTH, compaction: { keep_recent_tokens: 200 } }, env: { PY_LIVE_TOKEN: TOKEN } });
  });
  afterAll(async () => cd?.cleanup());

  it("appends a turn and assembles it; the answer's enums print their names", async () => {
    const r = await check(kind, "append_assemble", cd.address);
    expect(r).toMatchObject({ entry_ids: 5, mode: "MODE_NORMAL", prompt_authority: "PROMPT_AUTHORITY_ASSEMBLED", engine_id: "legacy", message_count: 5 });
    expect(r.roles).toEqual(["ROLE_SYSTEM", "ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL_RESULT", "ROLE_ASSISTANT"]);
    expect(r.last_text).toBe("Fixed the off-by-one in checkout step 1.");
    expect(r.estimated_tokens).toBeGreaterThan(0);
  });

  it("retries an append with its idempotency key: replayed, same ids, nothing written twice", async () => {
    const r = await check(kind, "idempotent_retry", cd.address);
    expect(r).toMatchObject({ first_replayed: false, retry_replayed: true, same_ids: true, entries: 4 });
    const other = r.other_messages as Refusal;
    expect(other).toMatchObject({ code: "ALREADY_EXISTS", method: "AppendMessages", reason: "IDEMPOTENCY_KEY_REUSED" });
    expect(other.message).toContain("turn-1");
  });

  it("pages through a transcript, and transcript() follows the pages to the end", async () => {
    const r = await check(kind, "transcript_paging", cd.address);
    expect(r).toMatchObject({ entries: 24, pages: 5, increasing: true, first_text: "Turn 0: why does test_checkout_0 fail?" });
  });

  it("search() finds words in the whole history, marks them, follows the pages, and still finds what a compaction covered; expand_compaction gives it back", async () => {
    const r = await check(kind, "search", cd.address);
    // Every word must be in the entry, whole: only turn 3's question (seq 13) holds both — its tool
    // result says "FAILED", another word.
    expect(r.newest_seqs).toEqual([13]);
    expect(r.snippet).toContain("«test_checkout_3»");
    expect(r).toMatchObject({ compacted: true, paged_unique: r.paged });
    expect(r.paged).toBeGreaterThanOrEqual(16);
    expect(r.covered).toBeGreaterThan(0);
    expect(r.covered_first).toBe("Turn 0: why does test_checkout_0 fail?");
    expect(r.found_after_compaction.length).toBeGreaterThan(0);
    expect(r.empty_query).toMatchObject({ code: "INVALID_ARGUMENT", method: "SearchTranscript" });
    expect(r.empty_query.message).toContain("query");
  });

  it("a bad request is ContextdError INVALID_ARGUMENT naming the field, and writes nothing", async () => {
    const r = await check(kind, "bad_request", cd.address);
    expect(r.bad_batch).toMatchObject({ code: "INVALID_ARGUMENT", method: "AppendMessages" });
    expect(r.bad_batch.message).toContain("messages[1].tool_call_id is required");
    expect(r.bad_batch.text).toMatch(/^AppendMessages: INVALID_ARGUMENT: messages\[1\]\.tool_call_id/);
    // The reason and its details, as ContextdError carries them (google.rpc.ErrorInfo, BadRequest).
    expect(r.bad_batch.field_violations.map((v: [string, string]) => v[0])).toContain("messages[1].tool_call_id");
    expect(r.nothing_written).toMatchObject({ code: "NOT_FOUND", method: "GetSession", reason: "SESSION_NOT_FOUND" });
    expect(r.nothing_written.metadata).toMatchObject({ session_id: expect.any(String) });
    expect(r.no_budget).toMatchObject({ code: "INVALID_ARGUMENT", method: "Assemble" });
    expect(r.no_budget.message).toContain("token_budget");
    expect(r.no_session).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(r.no_session.message).toContain("session.session_id is required");
  });

  it("deadlines: a call's timeout and the client's default end calls with DEADLINE_EXCEEDED", async () => {
    const r = await check(kind, "deadline", cd.address);
    expect(r.per_call).toMatchObject({ code: "DEADLINE_EXCEEDED", method: "Assemble" });
    expect(r.client_default).toMatchObject({ code: "DEADLINE_EXCEEDED", method: "Assemble" });
    expect(r.override_message_count).toBe(400);
  });

  it("without the runtime token (or with a wrong one) calls are UNAUTHENTICATED", async () => {
    const r = await check(kind, "unauthenticated", cd.address);
    expect(r.no_token).toMatchObject({ code: "UNAUTHENTICATED", method: "AppendMessages" });
    expect(r.wrong_token).toMatchObject({ code: "UNAUTHENTICATED", method: "Assemble" });
    expect(r.wrong_token.message).not.toContain("not-the-runtime-token");
    expect(r.health_needs_no_token).toBe("SERVING");
    expect(r.with_token).toBe(1);
  });
});

describe.each(KINDS)("contextd.%s over TLS and mTLS (TlsConfig)", (kind) => {
  let pki: Pki;
  let ca: CertFiles;
  let server: CertFiles;
  beforeAll(() => {
    pki = createPki();
    ca = pki.ca("python-client-ca");
    server = pki.leaf(ca, "contextd", "server");
  });
  afterAll(() => pki?.remove());

  it("TLS: trusting contextd's CA gets through; a plaintext client does not", async () => {
    const cd = await startContextd({ config: { ...AUTH, tls: { cert_file: server.cert, key_file: server.key } }, env: { PY_LIVE_TOKEN: TOKEN } });
    try {
      const r = await check(kind, "tls", cd.address, { CONTEXTD_TLS_CA: ca.cert });
      expect(r).toMatchObject({ mode: "MODE_NORMAL", health: "SERVING" });
      expect(r.plaintext).toMatchObject({ code: "UNAVAILABLE", method: "GetSession" });
    } finally {
      await cd.cleanup();
    }
  });

  it("mTLS: a client certificate from the trusted CA gets through; no certificate does not", async () => {
    const client = pki.leaf(ca, "python-runtime", "client");
    const cd = await startContextd({
      config: { ...AUTH, tls: { cert_file: server.cert, key_file: server.key, client_ca_file: ca.cert, require_client_cert: true } },
      env: { PY_LIVE_TOKEN: TOKEN },
    });
    try {
      const r = await check(kind, "tls", cd.address, { CONTEXTD_TLS_CA: ca.cert, CONTEXTD_TLS_CERT: client.cert, CONTEXTD_TLS_KEY: client.key });
      expect(r).toMatchObject({ mode: "MODE_NORMAL", health: "SERVING" });
      expect(r.plaintext).toMatchObject({ code: "UNAVAILABLE" });
      expect(r.without_client_cert).toMatchObject({ code: "UNAVAILABLE", method: "GetSession" });
    } finally {
      await cd.cleanup();
    }
  });
});
