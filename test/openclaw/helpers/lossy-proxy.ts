/**
 * A gRPC proxy in front of contextd's SessionService that can lose answers: it forwards every call
 * to contextd, and for the calls `loseAnswer` picks it waits for contextd's real answer and then
 * fails the call with UNAVAILABLE instead — what a runtime sees when a load balancer resets the
 * connection after the request was processed. The request did land; only its answer was lost.
 */
import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { SessionServiceClient, SessionServiceService } from "../../../src/contract/gen/contextd/v1/session.js";

export interface LossyProxy {
  address: string;
  /** Calls whose answer was lost so far, as `method` names. */
  lost(): string[];
  close(): Promise<void>;
}

export async function startLossyProxy(target: string, loseAnswer: (method: string, request: unknown) => boolean): Promise<LossyProxy> {
  const client = new SessionServiceClient(target, credentials.createInsecure());
  const lost: string[] = [];
  const impl: UntypedServiceImplementation = {};
  for (const [name, def] of Object.entries(SessionServiceService)) {
    impl[name] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const deadline = call.getDeadline();
      const md = new Metadata();
      for (const [k, v] of Object.entries(call.metadata.getMap())) md.set(k, v as string);
      const method = (client as unknown as Record<string, (...a: unknown[]) => unknown>)[name].bind(client);
      method(
        call.request,
        md,
        { deadline: deadline instanceof Date || typeof deadline === "number" ? deadline : Infinity },
        (err: Error | null, res: unknown) => {
          if (!err && loseAnswer(def.path, call.request)) {
            lost.push(def.path);
            callback({ code: status.UNAVAILABLE, details: "connection reset by the proxy after the call was answered" }, null);
            return;
          }
          callback(err, res);
        },
      );
    };
  }
  const server = new Server();
  server.addService(SessionServiceService, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    lost: () => [...lost],
    close: async () => {
      client.close();
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    },
  };
}
