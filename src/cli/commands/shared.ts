import { makeGenericClientConstructor, type Client } from "@grpc/grpc-js";
import { InvalidArgumentError, type Command } from "commander";
import { service as healthService } from "grpc-health-check";
import { RegistryServiceClient, ListEnginesRequest, type EngineStatus } from "../../contract/gen/contextd/v1/registry.js";
import { callUnary, channelCredentials, type ClientOptions } from "../../sdk/grpc-call.js";
import { ContextdClient } from "../../sdk/runtime-client.js";
import { errorText } from "../format.js";

/** The options every command inherits from the program. */
export interface GlobalOptions {
  address: string;
  token?: string;
  json?: boolean;
  timeout?: number;
}

export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}

/**
 * Connection options from the global flags. `defaultTimeoutMs` applies when `--timeout` is not
 * given (commands that may compact wait longer than quick reads).
 */
export function clientOptions(g: GlobalOptions, defaultTimeoutMs = 30_000): ClientOptions {
  return { address: g.address, token: g.token || undefined, timeoutMs: g.timeout ?? defaultTimeoutMs };
}

/** Runs `fn` with a SessionService client and closes it afterwards. */
export async function withSessions<T>(options: ClientOptions, fn: (client: ContextdClient) => Promise<T>): Promise<T> {
  const client = new ContextdClient(options);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

export async function listEngines(options: ClientOptions): Promise<EngineStatus[]> {
  const client = new RegistryServiceClient(options.address, channelCredentials(options));
  try {
    const res = await callUnary(client, client.listEngines, ListEnginesRequest.fromPartial({}), options);
    return res.engines;
  } finally {
    client.close();
  }
}

const HEALTH_STATUS = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
const HealthClient = makeGenericClientConstructor(healthService, "Health");

/** grpc.health.v1 Check for the whole server (`service: ""`): the status name, e.g. `SERVING`. */
export async function checkHealth(options: ClientOptions): Promise<string> {
  const client = new HealthClient(options.address, channelCredentials(options)) as Client & Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const res = await callUnary<{ service: string }, { status: string | number }>(client, client.check as any, { service: "" }, options);
    return typeof res.status === "number" ? (HEALTH_STATUS[res.status] ?? String(res.status)) : String(res.status);
  } finally {
    client.close();
  }
}

/** Wraps a command action: an error prints one line on stderr and sets exit code 1. */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      process.stderr.write(`contextctl: ${errorText(err)}\n`);
      process.exitCode = 1;
    }
  };
}

/** Parses a positive integer option value (a commander argParser). */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer");
  return n;
}
