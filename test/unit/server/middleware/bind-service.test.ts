/**
 * The last middleware step (src/server/middleware/bind-service.ts) on a real grpc-js server and
 * client over loopback: a call of a service whose requests are decoded on its turn holds its request
 * as bytes while it waits for that turn, and is decoded — or refused INVALID_ARGUMENT when it cannot
 * be — only once the turn comes; the handler runs on the turn and the turn ends with the handler.
 */
import { credentials, Metadata, Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { AssembleRequest, AssembleResponse, SessionServiceClient, SessionServiceService } from "../../../../src/contract/gen/contextd/v1/session.js";
import type { ServiceTable } from "../../../../src/contract/rpc-table.js";
import type { Turn } from "../../../../src/contract/tenant-limits.js";
import { bindService, decodingDefinition } from "../../../../src/server/middleware/bind-service.js";

/** A turn the test hands out by hand: `waiting` resolves once a call asks for one. */
class ManualTurns {
  granted = 0;
  left = 0;
  private pending: (() => void)[] = [];
  private asked: (() => void)[] = [];
  take = (): Promise<Turn> =>
    new Promise<Turn>((resolve) => {
      this.pending.push(() => {
        this.granted++;
        resolve({ leave: () => void this.left++, away: (work) => work() });
      });
      for (const a of this.asked.splice(0)) a();
    });
  waiting(): Promise<void> {
    return this.pending.length > 0 ? Promise.resolve() : new Promise((resolve) => this.asked.push(resolve));
  }
  grant(): void {
    this.pending.shift()!();
  }
}

let server: Server | undefined;
let client: SessionServiceClient | undefined;
afterEach(async () => {
  client?.close();
  if (server) await new Promise<void>((resolve) => server!.tryShutdown(() => resolve()));
  server = client = undefined;
});

async function serve(turns: ManualTurns, decoded: { count: number }, assemble: (req: AssembleRequest) => Promise<AssembleResponse>) {
  server = new Server();
  const counting = {
    ...SessionServiceService,
    assemble: {
      ...SessionServiceService.assemble,
      requestDeserialize: (bytes: Buffer) => {
        decoded.count++;
        return SessionServiceService.assemble.requestDeserialize(bytes);
      },
    },
  };
  // A row per method, as the pipeline requires; only Assemble's handler is called.
  const rows = Object.fromEntries(
    Object.keys(SessionServiceService).map((name) => [
      name,
      {
        auth: "runtime",
        session: {},
        deadline: "call",
        handler: name === "assemble" ? (req: AssembleRequest) => assemble(req) : () => Promise.reject(new Error("not called")),
      },
    ]),
  );
  const table = rows as unknown as ServiceTable<typeof SessionServiceService, undefined, "runtime", object>;
  server.addService(
    decodingDefinition(counting, { deferred: true }),
    bindService(SessionServiceService, table, {
      logger: pino({ level: "silent" }),
      authorize: () => undefined,
      turn: turns.take,
      sessions: () => ({ sessions: {} }),
    }),
  );
  const port = await new Promise<number>((resolve, reject) =>
    server!.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new SessionServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return client;
}

describe("bindService with turns: a waiting call holds its request as bytes", () => {
  it("the request is decoded only when the call's turn comes, the handler runs on it, and the turn ends with the handler", async () => {
    const turns = new ManualTurns();
    const decoded = { count: 0 };
    const seen: string[] = [];
    const c = await serve(turns, decoded, async (req) => {
      seen.push(req.session!.sessionId);
      return AssembleResponse.fromPartial({ estimatedTokens: 7, engineId: "legacy" });
    });
    const answer = new Promise<AssembleResponse>((resolve, reject) =>
      c.assemble(AssembleRequest.fromPartial({ session: { sessionId: "s1", agentId: "a" }, tokenBudget: 100 }), (err, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
    await turns.waiting();
    expect(decoded.count).toBe(0);
    expect(seen).toEqual([]);
    turns.grant();
    expect((await answer).estimatedTokens).toBe(7);
    expect(decoded.count).toBe(1);
    expect(seen).toEqual(["s1"]);
    expect([turns.granted, turns.left]).toEqual([1, 1]);
  });

  it("a request that is no protobuf of its type is refused INVALID_ARGUMENT on its turn, naming the RPC, and the handler never runs", async () => {
    const turns = new ManualTurns();
    const decoded = { count: 0 };
    let ran = false;
    const c = await serve(turns, decoded, async () => {
      ran = true;
      return AssembleResponse.fromPartial({});
    });
    // Field 1 (session) as a length-delimited field whose length runs past the end of the message.
    const garbage = Buffer.from([0x0a, 0x7f, 0x01]);
    const refused = new Promise<ServiceError>((resolve) =>
      c.makeUnaryRequest(
        SessionServiceService.assemble.path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        garbage,
        new Metadata(),
        (err) => resolve(err!),
      ),
    );
    await turns.waiting();
    expect(decoded.count).toBe(0);
    turns.grant();
    const err = await refused;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toMatch(/contextd\.v1\.SessionService\/Assemble is not a valid protobuf message/);
    expect(ran).toBe(false);
    expect([turns.granted, turns.left]).toEqual([1, 1]);
  });
});
