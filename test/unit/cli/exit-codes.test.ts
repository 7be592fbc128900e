import { Metadata, status } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { EXIT, UsageError, exitCodeFor, isUnreachable } from "../../../src/cli/exit-codes.js";

/** The one mapping from an error to contextctl's exit code (the process-level codes are in conventions.test.ts). */
const grpcError = (code: status, details: string) =>
  Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: new Metadata() });

describe("exitCodeFor", () => {
  it("3 only for errors grpc-js raises when it never got a connection", () => {
    const unreachable = [
      grpcError(status.UNAVAILABLE, "No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: "),
      grpcError(status.UNAVAILABLE, "No connection established"),
      grpcError(status.UNAVAILABLE, "round_robin: No connection established. Last error: Error: connect EHOSTUNREACH"),
      grpcError(status.UNAVAILABLE, "Name resolution failed for target dns:no-such-host.invalid:50051"),
      grpcError(status.DEADLINE_EXCEEDED, "Deadline exceeded after 1.500s,name resolution: 0.006s,metadata filters: 0.001s,Waiting for LB pick"),
      grpcError(status.DEADLINE_EXCEEDED, "Deadline exceeded after 5.000s,waiting for name resolution"),
    ];
    for (const err of unreachable) {
      expect(isUnreachable(err), err.details).toBe(true);
      expect(exitCodeFor(err), err.details).toBe(EXIT.unreachable);
    }
  });

  it("1 for everything a reachable contextd answers, UNAVAILABLE and deadlines included", () => {
    const failed = [
      grpcError(status.UNAVAILABLE, "store unavailable: connect ECONNREFUSED 10.0.0.5:5432"), // the server's own words
      grpcError(status.UNAVAILABLE, "Connection dropped"),
      grpcError(status.DEADLINE_EXCEEDED, "Deadline exceeded after 30.000s,LB pick: 0.002s,remote_addr=127.0.0.1:50051"),
      grpcError(status.NOT_FOUND, 'session "x" not found'),
      grpcError(status.UNAUTHENTICATED, "missing bearer token"),
      new Error("ENOENT: no such file or directory, open 'x.jsonl'"),
    ];
    for (const err of failed) expect(exitCodeFor(err), err.message).toBe(EXIT.failed);
  });

  it("2 for a UsageError", () => {
    expect(exitCodeFor(new UsageError("pass --session"))).toBe(EXIT.usage);
  });
});
