import { SessionServiceClient, type DeepPartial } from "../contract/gen/contextd/v1/session.js";
import * as S from "../contract/gen/contextd/v1/session.js";
import * as Q from "../contract/gen/contextd/v1/search.js";
import { CHANNEL_OPTIONS, callUnary, channelCredentials, type CallOptions, type ClientOptions } from "./grpc-call.js";

export type { ClientOptions, CallOptions } from "./grpc-call.js";
export { tlsCredentials } from "./grpc-call.js";
// Status codes and the error type of failed calls, so that callers need no grpc-js import of their own.
export { status, type ServiceError } from "@grpc/grpc-js";
export * from "../contract/index.js";

/**
 * A typed, promise-based client for SessionService — what an agent runtime written in TypeScript
 * uses. Requests accept partial objects (unset fields take their proto defaults).
 *
 * ```ts
 * const cx = new ContextdClient({ address: "127.0.0.1:50051", token: process.env.CONTEXTD_RUNTIME_TOKEN });
 * await cx.appendMessages({ session: { sessionId: "s1" }, messages: [userMessage("hi")] });
 * const { messages } = await cx.assemble({ session: { sessionId: "s1" }, tokenBudget: 32_000 });
 * ```
 */
export class ContextdClient {
  readonly raw: SessionServiceClient;

  constructor(private readonly options: ClientOptions) {
    this.raw = new SessionServiceClient(options.address, channelCredentials(options), CHANNEL_OPTIONS);
  }

  private call<Req, Res>(method: keyof SessionServiceClient, request: Req, options?: CallOptions): Promise<Res> {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return callUnary(this.raw, (this.raw as any)[method], request, this.options, options);
  }

  appendMessages(req: DeepPartial<S.AppendMessagesRequest>, o?: CallOptions): Promise<S.AppendMessagesResponse> {
    return this.call("appendMessages", S.AppendMessagesRequest.fromPartial(req), o);
  }
  assemble(req: DeepPartial<S.AssembleRequest>, o?: CallOptions): Promise<S.AssembleResponse> {
    return this.call("assemble", S.AssembleRequest.fromPartial(req), o);
  }
  compact(req: DeepPartial<S.CompactRequest>, o?: CallOptions): Promise<S.CompactResponse> {
    return this.call("compact", S.CompactRequest.fromPartial(req), o);
  }
  afterTurn(req: DeepPartial<S.AfterTurnRequest>, o?: CallOptions): Promise<S.AfterTurnResponse> {
    return this.call("afterTurn", S.AfterTurnRequest.fromPartial(req), o);
  }
  maintain(req: DeepPartial<S.MaintainRequest>, o?: CallOptions): Promise<S.MaintainResponse> {
    return this.call("maintain", S.MaintainRequest.fromPartial(req), o);
  }
  prepareSubagentSpawn(req: DeepPartial<S.PrepareSubagentSpawnRequest>, o?: CallOptions): Promise<S.PrepareSubagentSpawnResponse> {
    return this.call("prepareSubagentSpawn", S.PrepareSubagentSpawnRequest.fromPartial(req), o);
  }
  rollbackSubagentSpawn(req: DeepPartial<S.RollbackSubagentSpawnRequest>, o?: CallOptions): Promise<S.RollbackSubagentSpawnResponse> {
    return this.call("rollbackSubagentSpawn", S.RollbackSubagentSpawnRequest.fromPartial(req), o);
  }
  endSubagent(req: DeepPartial<S.EndSubagentRequest>, o?: CallOptions): Promise<S.EndSubagentResponse> {
    return this.call("endSubagent", S.EndSubagentRequest.fromPartial(req), o);
  }
  getSession(req: DeepPartial<S.GetSessionRequest>, o?: CallOptions): Promise<S.GetSessionResponse> {
    return this.call("getSession", S.GetSessionRequest.fromPartial(req), o);
  }
  listSessions(req: DeepPartial<S.ListSessionsRequest> = {}, o?: CallOptions): Promise<S.ListSessionsResponse> {
    return this.call("listSessions", S.ListSessionsRequest.fromPartial(req), o);
  }
  getTranscript(req: DeepPartial<S.GetTranscriptRequest>, o?: CallOptions): Promise<S.GetTranscriptResponse> {
    return this.call("getTranscript", S.GetTranscriptRequest.fromPartial(req), o);
  }
  importTranscript(req: DeepPartial<S.ImportTranscriptRequest>, o?: CallOptions): Promise<S.ImportTranscriptResponse> {
    return this.call("importTranscript", S.ImportTranscriptRequest.fromPartial(req), o);
  }
  exportTranscript(req: DeepPartial<S.ExportTranscriptRequest>, o?: CallOptions): Promise<S.ExportTranscriptResponse> {
    return this.call("exportTranscript", S.ExportTranscriptRequest.fromPartial(req), o);
  }
  deleteSession(req: DeepPartial<S.DeleteSessionRequest>, o?: CallOptions): Promise<S.DeleteSessionResponse> {
    return this.call("deleteSession", S.DeleteSessionRequest.fromPartial(req), o);
  }
  searchTranscript(req: DeepPartial<Q.SearchTranscriptRequest>, o?: CallOptions): Promise<Q.SearchTranscriptResponse> {
    return this.call("searchTranscript", Q.SearchTranscriptRequest.fromPartial(req), o);
  }
  expandCompaction(req: DeepPartial<Q.ExpandCompactionRequest>, o?: CallOptions): Promise<Q.ExpandCompactionResponse> {
    return this.call("expandCompaction", Q.ExpandCompactionRequest.fromPartial(req), o);
  }

  /** Every entry of a session's transcript, following page tokens to the end. */
  async *transcript(sessionId: string, pageSize = 1000): AsyncGenerator<S.GetTranscriptResponse["entries"][number]> {
    let pageToken = "";
    do {
      const page = await this.getTranscript({ session: { sessionId }, pageSize, pageToken });
      yield* page.entries;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  close(): void {
    this.raw.close();
  }
}
