/**
 * Raw bytes at every RPC path (issue 11, part 5): over plain HTTP/2 (node:http2, no gRPC library on
 * our side), one real contextd — with credentials required, as in production — gets requests with
 * proper gRPC headers and a bearer token (a runtime's, an operator's, an owner's, junk or none) and a
 * body that is anything but a proper request: random bytes, protobuf-shaped bytes with edge-case
 * varints, invalid UTF-8 and nesting, a length prefix that over- or under-states the message, the
 * compressed flag without an encoding, gzip of garbage, a 4 GiB length, no framing at all, an empty
 * body, two messages on a unary call, a message split across writes. For every path of every
 * service the server exposes — the three contextd services, ContextEngineService (listed by
 * reflection, not served), grpc.health.v1, server reflection v1 and v1alpha — and an unknown path:
 *
 *   - the server answers a grpc-status (never a reset stream, a dropped connection or silence);
 *   - not UNKNOWN; a body that is no protobuf of the request type is INVALID_ARGUMENT on contextd's
 *     services, and INTERNAL only as grpc-js's own answer outside them ("Error deserializing
 *     request" on health and reflection) or for gzip that does not inflate;
 *   - a non-OK status carries a message; DEADLINE_EXCEEDED only for streams (they stay open);
 *   - afterwards the server is up: health SERVING, and a real append and assemble work.
 */
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { credentials, loadPackageDefinition, status } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import fc from "fast-check";
import { service as healthService } from "grpc-health-check";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextEngineServiceService } from "../../src/contract/gen/contextd/v1/engine.js";
import { HostServiceService } from "../../src/contract/gen/contextd/v1/host.js";
import { RegistryServiceService } from "../../src/contract/gen/contextd/v1/registry.js";
import { SessionServiceService } from "../../src/contract/gen/contextd/v1/session.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { healthCheck } from "../helpers/health.js";
import * as A from "./helpers/arbitraries.js";

const TOKENS = { runtime: "runtime-secret", operator: "operator-secret", owner: "owner-secret" };
/** The contextd services' own paths (ContextEngineService is the engines' contract, listed but not served). */
const SERVED = /^\/contextd\.v1\.(Session|Registry|Host)Service\//;
const REFLECTION = ["v1", "v1alpha"].map((v) => `/grpc.reflection.${v}.ServerReflection/ServerReflectionInfo`);

/** Every method path the server exposes, and whether the method streams its answers. */
const METHODS: Array<{ path: string; streams: boolean }> = [
  ...[SessionServiceService, RegistryServiceService, HostServiceService, ContextEngineServiceService, healthService].flatMap((def) =>
    Object.values(def as Record<string, { path: string; responseStream: boolean }>).map((m) => ({ path: m.path, streams: m.responseStream })),
  ),
  ...REFLECTION.map((p) => ({ path: p, streams: true })),
  { path: "/contextd.v1.NoSuchService/Nothing", streams: false },
];

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

const varint = (n: bigint): Buffer => {
  const out: number[] = [];
  let v = BigInt.asUintN(64, n);
  do {
    out.push(Number(v & 0x7fn) | (v > 0x7fn ? 0x80 : 0));
    v >>= 7n;
  } while (v > 0n);
  return Buffer.from(out);
};
const tag = (field: number, wire: number) => varint(BigInt((field << 3) | wire));
const varintValue = fc.oneof(
  fc.constantFrom(0n, 1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n, -1n),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
);
/** Text as UTF-8, and byte strings that are not UTF-8 (an encoded surrogate, an overlong NUL, 0xFF). */
const textBytes = fc.oneof(
  A.adversarialString({ maxLength: 30 }).map((s) => Buffer.from(s, "utf8")),
  fc.constantFrom(Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xc0, 0x80]), Buffer.from([0xff, 0xfe]), Buffer.from("v1:", "utf8")),
  fc.uint8Array({ maxLength: 24 }).map((b) => Buffer.from(b)),
);
/** Bytes shaped like protobuf — fields 1..20 of every wire type, nested messages — so that many decode. */
const { message: protobufish } = fc.letrec<{ message: Buffer; field: Buffer }>((tie) => ({
  message: fc.array(tie("field"), { maxLength: 6 }).map((parts) => Buffer.concat(parts)),
  field: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.tuple(fc.integer({ min: 1, max: 20 }), varintValue).map(([f, v]) => Buffer.concat([tag(f, 0), varint(v)])),
    fc.tuple(fc.integer({ min: 1, max: 20 }), textBytes).map(([f, b]) => Buffer.concat([tag(f, 2), varint(BigInt(b.length)), b])),
    fc.tuple(fc.integer({ min: 1, max: 20 }), tie("message")).map(([f, b]) => Buffer.concat([tag(f, 2), varint(BigInt(b.length)), b])),
    fc.tuple(fc.integer({ min: 1, max: 20 }), fc.uint8Array({ minLength: 8, maxLength: 8 })).map(([f, b]) => Buffer.concat([tag(f, 1), Buffer.from(b)])),
    fc
      .tuple(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 3, max: 7 }), fc.uint8Array({ maxLength: 6 }))
      .map(([f, w, b]) => Buffer.concat([tag(f, w), Buffer.from(b)])),
  ),
}));
const payload = fc.oneof(
  protobufish,
  fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
);

const frame = (flag: number, body: Buffer, length = body.length) => {
  const head = Buffer.alloc(5);
  head.writeUInt8(flag, 0);
  head.writeUInt32BE(length >>> 0, 1);
  return Buffer.concat([head, body]);
};
type Shape =
  | "framed"
  | "compressed-flag-no-encoding"
  | "gzip"
  | "gzip-garbage"
  | "length-over"
  | "length-under"
  | "huge-length"
  | "bare"
  | "empty"
  | "two-messages"
  | "split";
const SHAPES: Shape[] = [
  "framed",
  "compressed-flag-no-encoding",
  "gzip",
  "gzip-garbage",
  "length-over",
  "length-under",
  "huge-length",
  "bare",
  "empty",
  "two-messages",
  "split",
];

/** The body's chunks (each one write) and the grpc-encoding header it needs, for a shape. */
function body(shape: Shape, p: Buffer, k: number): { chunks: Buffer[]; encoding?: string } {
  switch (shape) {
    case "framed":
      return { chunks: [frame(0, p)] };
    case "compressed-flag-no-encoding":
      return { chunks: [frame(1, p)] };
    case "gzip":
      return { chunks: [frame(1, gzipSync(p))], encoding: "gzip" };
    case "gzip-garbage":
      return { chunks: [frame(1, p)], encoding: "gzip" };
    case "length-over":
      return { chunks: [frame(0, p, p.length + 1 + k)] };
    case "length-under":
      return { chunks: [frame(0, p, Math.max(0, p.length - 1 - k))] };
    case "huge-length":
      return { chunks: [frame(0, p, 0xffffffff)] };
    case "bare":
      return { chunks: [p] };
    case "empty":
      return { chunks: [] };
    case "two-messages":
      return { chunks: [frame(0, p), frame(0, p)] };
    case "split": {
      const whole = frame(0, p);
      const cut = Math.min(whole.length, 1 + (k % Math.max(1, whole.length)));
      return { chunks: [whole.subarray(0, cut), whole.subarray(cut)] };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The raw client
// ---------------------------------------------------------------------------------------------

interface Answer {
  code?: number;
  message: string;
  /** Why no status came: a stream error, a reset, a timeout. */
  failure?: string;
}

/** One request on `session`: the headers, the chunks, END_STREAM; resolves with the status it got. */
function send(
  session: http2.ClientHttp2Session,
  method: { path: string; streams: boolean },
  token: string | undefined,
  b: ReturnType<typeof body>,
): Promise<Answer> {
  return new Promise((resolve) => {
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": method.path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": method.streams ? "300m" : "20S",
    };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (b.encoding) headers["grpc-encoding"] = b.encoding;
    const req = session.request(headers);
    let answer: Answer | undefined;
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) answer = { code: Number(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"] ?? "")) };
    };
    const guard = setTimeout(() => finish({ message: "", failure: "no answer within 30 s" }), 30_000);
    const finish = (a: Answer) => {
      clearTimeout(guard);
      req.close();
      resolve(a);
    };
    req.on("response", take);
    req.on("trailers", take);
    req.on("data", () => undefined);
    req.on("error", (err) => finish(answer ?? { message: "", failure: `stream error: ${err.message}` }));
    req.on("close", () => finish(answer ?? { message: "", failure: `closed without a grpc-status (RST_STREAM code ${req.rstCode})` }));
    for (const chunk of b.chunks) req.write(chunk);
    req.end();
  });
}

describe("raw bytes at every RPC path", () => {
  let contextd: ContextdProcess;
  let session: http2.ClientHttp2Session;
  const connect = () => {
    session = http2.connect(`http://${contextd.address}`);
    session.on("error", () => undefined);
  };

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: {
          required: true,
          owners: { fuzz: { token_env: "FUZZ_OWNER" } },
          operators: [{ token_env: "FUZZ_OPERATOR" }],
          runtimes: [{ token_env: "FUZZ_RUNTIME", agents: ["*"] }],
        },
        limits: { max_message_bytes: 64 * 1024 },
      },
      env: { FUZZ_OWNER: TOKENS.owner, FUZZ_OPERATOR: TOKENS.operator, FUZZ_RUNTIME: TOKENS.runtime },
    });
    connect();
  });
  afterAll(async () => {
    session?.close();
    await contextd?.cleanup();
  });

  it("covers every service that server reflection lists", async () => {
    const proto = path.join(REPO_ROOT, "node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto");
    const pkg = loadPackageDefinition(loadSync(proto)) as unknown as {
      grpc: {
        reflection: {
          v1: {
            ServerReflection: new (a: string, c: unknown) => { serverReflectionInfo(): NodeJS.ReadWriteStream & { write(m: object): boolean }; close(): void };
          };
        };
      };
    };
    const client = new pkg.grpc.reflection.v1.ServerReflection(contextd.address, credentials.createInsecure());
    const stream = client.serverReflectionInfo();
    const listed = await new Promise<string[]>((resolve, reject) => {
      stream.once("data", (r: { listServicesResponse: { service: Array<{ name: string }> } }) => resolve(r.listServicesResponse.service.map((s) => s.name)));
      stream.once("error", reject);
      stream.write({ listServices: "" });
    });
    stream.end();
    client.close();
    const covered = new Set(METHODS.map((m) => m.path.slice(1, m.path.lastIndexOf("/"))));
    for (const name of listed) expect(covered, `${name} is listed by reflection but not fuzzed`).toContain(name);
  });

  it("answers a status to whatever arrives, and stays up", async () => {
    const seen = new Map<string, number>();
    let decodeRefusals = 0;
    const request = fc.record({
      // Mostly well-framed bodies to the paths contextd serves, so that most reach a handler.
      method: fc.oneof(
        { arbitrary: fc.constantFrom(...METHODS.filter((m) => SERVED.test(m.path))), weight: 3 },
        { arbitrary: fc.constantFrom(...METHODS), weight: 1 },
      ),
      shape: fc.oneof({ arbitrary: fc.constant<Shape>("framed"), weight: SHAPES.length }, { arbitrary: fc.constantFrom(...SHAPES), weight: SHAPES.length }),
      payload,
      k: fc.nat({ max: 64 }),
      token: fc.oneof(
        fc.constantFrom(TOKENS.runtime, TOKENS.runtime, TOKENS.operator, TOKENS.owner, undefined),
        fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 20 }),
      ),
    });
    await fc.assert(
      fc.asyncProperty(request, async ({ method, shape, payload: p, k, token }) => {
        if (session.closed || session.destroyed) connect();
        const a = await send(session, method, token, body(shape, p, k));
        const what = `${shape} body (${p.length} bytes: ${p.subarray(0, 48).toString("hex")}) to ${method.path} → ${a.failure ?? `${status[a.code!] ?? a.code}: ${a.message}`}`;
        expect(a.failure, `${what}\n${contextd.exitCode() === undefined ? "" : `contextd exited:\n${contextd.logs().slice(-3000)}`}`).toBeUndefined();
        seen.set(status[a.code!] ?? String(a.code), (seen.get(status[a.code!] ?? String(a.code)) ?? 0) + 1);
        expect(a.code, what).not.toBe(status.UNKNOWN);
        if (a.code === status.INTERNAL) {
          // contextd's own services answer an undecodable body INVALID_ARGUMENT (bind-service.ts
          // decodingDefinition); grpc-js's INTERNAL stays for health and reflection, and for gzip
          // that does not inflate (grpc-js fails it before any decoder runs).
          const gzip = shape.startsWith("gzip") && a.message === "Failed to decompress message";
          const library = !SERVED.test(method.path) && /^Error deserializing request/.test(a.message);
          expect(gzip || library, `${what}: INTERNAL only for a body grpc-js cannot decode, outside contextd's services`).toBe(true);
        }
        if (a.code === status.INVALID_ARGUMENT && /is not a valid protobuf message/.test(a.message)) decodeRefusals++;
        if (a.code !== status.OK) expect(a.message.trim(), `${what}: a status says why`).not.toBe("");
        if (a.code === status.DEADLINE_EXCEEDED) expect(method.streams, `${what}: only streams stay open`).toBe(true);
      }),
      A.fuzzRuns("raw bytes", 1500),
    );
    console.info(`[fuzz] raw bytes answered: ${JSON.stringify(Object.fromEntries(seen))}; undecodable refused INVALID_ARGUMENT: ${decodeRefusals}`);
    expect(decodeRefusals, "some bodies reached contextd's decoders and were refused by them").toBeGreaterThan(0);
    expect(await healthCheck(contextd.address)).toBe("SERVING");
    const cx = new ContextdClient({ address: contextd.address, token: TOKENS.runtime });
    try {
      await cx.appendMessages({ session: { sessionId: "after-raw-bytes" }, messages: [user("still up?")] });
      expect((await cx.assemble({ session: { sessionId: "after-raw-bytes" }, tokenBudget: 1000 })).messages).toHaveLength(1);
    } finally {
      cx.close();
    }
  });
});
