/**
 * Finding: "a host token is a plain bearer token" — another process used one during its call to
 * rewrite the transcript, and an engine that declared no `transcript-rewrite` could still rewrite.
 * Host tokens are now scoped to one engine, one session and one call's lifetime, open only the
 * HostService RPCs the engine declared in EngineInfo.host_requirements, and are bound to where the
 * engine is (its registered address; with mTLS, its owner's certificate). See
 * src/registry/host-grants.ts and src/registry/caller-binding.ts.
 *
 * Real contextd processes and real engine processes (test/security/fixtures/scoped-host-engine.ts,
 * on the TypeScript SDK) that hold an Assemble open, so its token is live while the test acts.
 * "Another process" is a separate gRPC client in the test process: its own connection, its own
 * process — on the same host, which address binding cannot tell apart (that test says so); for the
 * other-host case the engine registers at this machine's non-loopback address while the thief
 * comes in over loopback, i.e. from another source address.
 */
import { credentials, Metadata, status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as H from "../../src/contract/gen/contextd/v1/host.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient, tlsCredentials } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { startScopedHostEngine, type HeldCall, type ScopedHostEngine } from "./fixtures/scoped-host-engine-process.js";
import { createPki, type CertFiles, type Pki } from "./helpers/test-pki.js";

/** HostService as another process would call it: its own channel, the token in the metadata. */
function steal(address: string, creds: ChannelCredentials = credentials.createInsecure()) {
  const client = new H.HostServiceClient(address, creds);
  const call = <Req, Res>(method: (r: Req, m: Metadata, o: object, cb: (e: ServiceError | null, r: Res) => void) => unknown, req: Req, token: string) =>
    new Promise<Res>((resolve, reject) => {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      method.call(client, req, md, { deadline: new Date(Date.now() + 10_000) }, (e, r) => (e ? reject(e) : resolve(r)));
    });
  return {
    read: (sessionId: string, token: string) => call(client.readTranscript, H.ReadTranscriptRequest.fromPartial({ session: { sessionId } }), token),
    rewrite: (sessionId: string, entryId: string, text: string, token: string) =>
      call(
        client.rewriteTranscriptEntries,
        H.RewriteTranscriptEntriesRequest.fromPartial({ session: { sessionId }, rewrites: [{ entryId, message: user(text) }] }),
        token,
      ),
    close: () => client.close(),
  };
}
const refused = (p: Promise<unknown>) =>
  p.then(
    () => ({ code: status.OK, details: "" }) as ServiceError,
    (e: ServiceError) => e,
  );

/** A session routed to `engine`, with two messages, and an Assemble held open by the engine. */
async function holdCall(cx: ContextdClient, engine: ScopedHostEngine, sessionId: string, agentId: string, more: string[] = []) {
  const session = { sessionId, agentId };
  const { entryIds } = await cx.appendMessages({ session, messages: [user("the original first message"), user("second"), ...more.map((t) => user(t))] });
  const answered = cx.assemble({ session, tokenBudget: 10_000 }, { timeoutMs: 30_000 });
  answered.catch(() => undefined);
  const held: HeldCall = await engine.held(sessionId);
  return { session, entryIds, held, answered };
}

const texts = async (cx: ContextdClient, sessionId: string) =>
  (await cx.getTranscript({ session: { sessionId } })).entries.map((e) => ({
    text: e.entry?.$case === "message" ? messageText(e.entry.value) : "",
    revision: e.revision,
  }));

describe("host tokens on the engine's own host (loopback, no mTLS)", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let bare: ScopedHostEngine;
  let rw: ScopedHostEngine;
  let other: ReturnType<typeof steal>;

  beforeAll(async () => {
    cd = await startContextd({
      config: {
        slots: { agents: { bare: "bare-engine", rw: "rw-engine" } },
        engines: { timeouts: { assemble: "30s" } },
        compaction: { keep_recent_tokens: 1 },
      },
    });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 30_000 });
    other = steal(cd.address);
    [bare, rw] = await Promise.all([
      startScopedHostEngine({ engineId: "bare-engine", registry: cd.address, owner: "team", requirements: [] }),
      startScopedHostEngine({ engineId: "rw-engine", registry: cd.address, owner: "team", requirements: ["transcript-rewrite", "host-compaction"] }),
    ]);
    expect(await bare.registered, bare.logs()).toMatchObject({ ok: true });
    expect(await rw.registered, rw.logs()).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(async () => {
    other?.close();
    cx?.close();
    await Promise.all([bare?.stop(), rw?.stop()]);
    await cd?.cleanup();
  });

  it("an engine that declared no transcript-rewrite is refused RewriteTranscriptEntries, naming the requirement and the engine; the transcript stays intact", async () => {
    const { entryIds, answered } = await holdCall(cx, bare, "undeclared-rewrite", "bare");
    const res = await bare.host("undeclared-rewrite", "rewrite", { entryId: entryIds[0], text: "rewritten by an engine that may not" });
    expect(res.code).toBe(status.PERMISSION_DENIED);
    expect(res.details).toContain('"transcript-rewrite"');
    expect(res.details).toContain('"bare-engine"');
    await bare.release("undeclared-rewrite");
    await answered;
    expect(await texts(cx, "undeclared-rewrite")).toEqual([
      { text: "the original first message", revision: 0 },
      { text: "second", revision: 0 },
    ]);
  });

  it("undeclared DelegateCompaction and Complete are refused the same way; ReadTranscript needs no requirement", async () => {
    const { answered } = await holdCall(cx, bare, "undeclared-others", "bare");
    const delegate = await bare.host("undeclared-others", "delegate");
    expect(delegate.code).toBe(status.PERMISSION_DENIED);
    expect(delegate.details).toMatch(/DelegateCompaction needs host requirement "host-compaction".*"bare-engine"/);
    const complete = await bare.host("undeclared-others", "complete");
    expect(complete.code).toBe(status.PERMISSION_DENIED);
    expect(complete.details).toMatch(/Complete needs host requirement "llm-complete".*"bare-engine"/);
    expect(await bare.host("undeclared-others", "read")).toMatchObject({ code: status.OK });
    await bare.release("undeclared-others");
    await answered;
    expect((await texts(cx, "undeclared-others")).every((e) => e.revision === 0)).toBe(true);
  });

  it("a host token is scoped to one engine: its declared requirements allow its calls, and what they commit is attributed to it", async () => {
    // Enough history that the host's native compaction makes progress.
    const long = Array.from({ length: 6 }, (_, i) => `message ${i}: ${"lorem ipsum dolor sit amet ".repeat(40)}`);
    const { entryIds, answered } = await holdCall(cx, rw, "declared", "rw", long);
    expect(await rw.host("declared", "rewrite", { entryId: entryIds[0], text: "fixed by rw-engine" })).toMatchObject({
      code: status.OK,
      value: { rewrittenEntries: 1 },
    });
    const delegated = await rw.host("declared", "delegate");
    expect(delegated, JSON.stringify(delegated.value)).toMatchObject({ code: status.OK, value: { compacted: true } });
    await rw.release("declared");
    await answered;
    const entries = (await cx.getTranscript({ session: { sessionId: "declared" } })).entries;
    expect(entries.find((e) => e.id === entryIds[0])?.revision).toBe(1);
    const compaction = entries.find((e) => e.entry?.$case === "compaction");
    expect(compaction?.entry?.$case === "compaction" && compaction.entry.value.engineId).toBe("rw-engine");
  });

  it("a host token is scoped to one engine: another engine's declarations do not extend to it", async () => {
    // rw-engine may rewrite; bare-engine's token, presented by anyone, still may not.
    const { entryIds, held, answered } = await holdCall(cx, bare, "engine-scope", "bare");
    const err = await refused(other.rewrite("engine-scope", entryIds[0]!, "via bare-engine's token", held.token));
    expect(err.code).toBe(status.PERMISSION_DENIED);
    expect(err.details).toContain('"bare-engine"');
    await bare.release("engine-scope");
    await answered;
  });

  it("a host token for session A is refused on session B", async () => {
    await cx.appendMessages({ session: { sessionId: "session-b", agentId: "bare" }, messages: [user("B's message")] });
    const { held, answered } = await holdCall(cx, bare, "session-a", "bare");
    const err = await refused(other.read("session-b", held.token));
    expect(err.code).toBe(status.PERMISSION_DENIED);
    expect(err.details).toContain('scoped to session "session-a", not "session-b"');
    await bare.release("session-a");
    await answered;
  });

  it("a host token is refused once its engine call has ended", async () => {
    const { held, answered } = await holdCall(cx, bare, "call-ended", "bare");
    expect((await other.read("call-ended", held.token)).entries).toHaveLength(2);
    await bare.release("call-ended");
    await answered;
    const err = await refused(other.read("call-ended", held.token));
    expect(err.code).toBe(status.UNAUTHENTICATED);
    expect(err.details).toContain("the engine call that carried it has ended");
  });

  it("a host token used by another process on the engine's own host: NOT stopped by address (residual risk without mTLS), but held to the engine's scope", async () => {
    // What is not stopped: a separate connection from another process on this host, presenting a
    // live token of a loopback engine, reads and (for an engine that declared it) rewrites that
    // call's session. Loopback addresses tell no local process apart — a connection to 127.0.0.2
    // even leaves from 127.0.0.1 — so contextd checks only that the caller is local.
    const { entryIds, held, answered } = await holdCall(cx, rw, "same-host", "rw");
    expect((await other.read("same-host", held.token)).entries).toHaveLength(2);
    await other.rewrite("same-host", entryIds[1]!, "rewritten by another local process", held.token);
    expect(await texts(cx, "same-host")).toContainEqual({ text: "rewritten by another local process", revision: 1 });
    // What is stopped: any other session, and everything once the call ended.
    expect((await refused(other.read("undeclared-rewrite", held.token))).code).toBe(status.PERMISSION_DENIED);
    await rw.release("same-host");
    await answered;
    expect((await refused(other.read("same-host", held.token))).code).toBe(status.UNAUTHENTICATED);
  });
});

/** A non-loopback IPv4 address of this machine: an engine registered there is "on another host" as far as address binding goes. */
const otherAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

describe("host tokens of an engine at another address", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let engine: ScopedHostEngine;
  let port: number;

  beforeAll(async () => {
    // Not skipped: a machine without a non-loopback address cannot show this, and must say so.
    expect(otherAddress, "this test needs a non-loopback IPv4 address on the machine").toBeDefined();
    // contextd on every interface; engines call it back at `otherAddress`, so the engine's
    // connections leave from there, while the test's own client comes in through 127.0.0.1: a
    // different source address, as a process on another host would have. (The engine shares this
    // machine; a network namespace would make it a second machine, but needs nftables here.)
    port = await getFreePort("0.0.0.0");
    cd = await startContextd({
      config: {
        listen: `0.0.0.0:${port}`,
        host_endpoint: `${otherAddress}:${port}`,
        slots: { context_engine: "remote-engine" },
        engines: { allow_endpoints: [otherAddress!], timeouts: { assemble: "30s" } },
      },
    });
    cx = new ContextdClient({ address: `127.0.0.1:${port}`, timeoutMs: 30_000 });
    engine = await startScopedHostEngine({
      engineId: "remote-engine",
      registry: `${otherAddress}:${port}`,
      owner: "team",
      requirements: ["transcript-rewrite"],
      listen: `${otherAddress}:0`,
    });
    expect(await engine.registered, engine.logs()).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(async () => {
    cx?.close();
    await engine?.stop();
    await cd?.cleanup();
  });

  it("a host token presented from another host than its engine's is refused (UNAUTHENTICATED); the engine's own callbacks are accepted", async () => {
    const { entryIds, held, answered } = await holdCall(cx, engine, "cross-host", "");
    expect(held.endpoint).toBe(`${otherAddress}:${port}`);
    // The engine registered at `otherAddress` and calls back from there.
    expect(await engine.host("cross-host", "read")).toMatchObject({ code: status.OK });
    const thief = steal(`127.0.0.1:${port}`);
    try {
      const err = await refused(thief.rewrite("cross-host", entryIds[0]!, "rewritten from another host", held.token));
      expect(err.code).toBe(status.UNAUTHENTICATED);
      expect(err.details).toContain('presented from "127.0.0.1"');
      expect(err.details).toContain(`the engine's address "${otherAddress}"`);
    } finally {
      thief.close();
    }
    await engine.release("cross-host");
    await answered;
    expect((await texts(cx, "cross-host")).every((e) => e.revision === 0)).toBe(true);
  });
});

describe("host tokens under mTLS (tls.require_client_cert)", () => {
  let pki: Pki;
  let ca: CertFiles;
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let engine: ScopedHostEngine;
  const clients = new Map<string, CertFiles>();
  const client = (cn: string): CertFiles => {
    if (!clients.has(cn)) clients.set(cn, pki.leaf(ca, cn, "client"));
    return clients.get(cn)!;
  };
  const creds = (cn: string) => {
    const c = client(cn);
    return tlsCredentials({ ca: readFileSync(ca.cert), cert: readFileSync(c.cert), key: readFileSync(c.key) });
  };

  beforeAll(async () => {
    pki = createPki();
    ca = pki.ca("host-token-ca");
    const server = pki.leaf(ca, "localhost", "server");
    cd = await startContextd({
      config: {
        tls: { cert_file: server.cert, key_file: server.key, client_ca_file: ca.cert, require_client_cert: true },
        slots: { context_engine: "mtls-engine" },
        engines: { timeouts: { assemble: "30s" } },
      },
    });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 30_000, credentials: creds("runtime") });
    const team = client("team");
    engine = await startScopedHostEngine({
      engineId: "mtls-engine",
      registry: cd.address,
      owner: "team",
      requirements: ["transcript-rewrite"],
      tls: { ca: ca.cert, ...team },
    });
    expect(await engine.registered, engine.logs()).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(async () => {
    cx?.close();
    await engine?.stop();
    await cd?.cleanup();
    pki?.remove();
  });

  it("with tls.require_client_cert, a host token is usable only on a connection whose certificate names the engine's owner", async () => {
    const { entryIds, held, answered } = await holdCall(cx, engine, "mtls", "");
    expect(await engine.host("mtls", "read")).toMatchObject({ code: status.OK });
    const mallory = steal(cd.address, creds("mallory"));
    const owner = steal(cd.address, creds("team"));
    try {
      const err = await refused(mallory.rewrite("mtls", entryIds[0]!, "rewritten by another owner's process", held.token));
      expect(err.code).toBe(status.UNAUTHENTICATED);
      expect(err.details).toContain('client certificate for "mallory", not for its owner "team"');
      // The binding is to the owner's identity, not to the engine process: a holder of the owner's
      // certificate (the owner's own processes) can still use the live token.
      expect((await owner.read("mtls", held.token)).entries).toHaveLength(2);
    } finally {
      mallory.close();
      owner.close();
    }
    await engine.release("mtls");
    await answered;
    expect((await texts(cx, "mtls")).every((e) => e.revision === 0)).toBe(true);
  });
});
