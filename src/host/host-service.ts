import type { Logger } from "pino";
import { UnimplementedError } from "../contract/errors.js";
import type { HostServiceServer } from "../contract/gen/contextd/v1/host.js";
import { unary } from "../contract/unary.js";

/**
 * HostService (engine callbacks). Not built yet: every RPC answers UNIMPLEMENTED until remote
 * engines and host tokens land (see README, Status).
 */
export function createHostService(logger: Logger): HostServiceServer {
  const unimplemented = (method: string) =>
    unary(method, logger, async () => {
      throw new UnimplementedError(`HostService.${method} is not built yet: it arrives with remote engines (see README, Status)`);
    });
  return {
    readTranscript: unimplemented("ReadTranscript"),
    rewriteTranscriptEntries: unimplemented("RewriteTranscriptEntries"),
    delegateCompaction: unimplemented("DelegateCompaction"),
    complete: unimplemented("Complete"),
  };
}
