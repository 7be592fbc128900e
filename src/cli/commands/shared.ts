import { makeGenericClientConstructor, type Client } from "@grpc/grpc-js";
import { InvalidArgumentError, type Command } from "commander";
import { service as healthService } from "grpc-health-check";
import { RegistryServiceClient, ListEnginesRequest, type EngineStatus } from "../../contract/gen/contextd/v1/registry.js";
import { CHANNEL_OPTIONS, callUnary, channelCredentials, type ClientOptions } from "../../sdk/grpc-call.js";
import { ContextdClient } from "../../sdk/runtime-client.js";
import { exitCodeFor } from "../exit-codes.js";
import { errorText } from "../format.js";
import { writeStderr } from "../terminal-text.js";

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

/**
 * Which credential a command needs. `runtime`: SessionService (token: --token, else
 * $CONTEXTD_RUNTIME_TOKEN). `reader`: reading the registry, which any runtime, owner or operator
 * token may do (--token, else $CONTEXTD_RUNTIME_TOKEN, else $CONTEXTD_ADMIN_TOKEN). `operator`:
 * isolate/release (--token, else $CONTEXTD_ADMIN_TOKEN, else $CONTEXTD_RUNTIME_TOKEN) — the operator
 * token in the environment is preferred over a runtime token there, so a shell holding both works.
 * `owner-or-operator`: deregister (--token, else $CONTEXTD_ADMIN_TOKEN, else $CONTEXTD_OWNER_TOKEN,
 * the variable an engine reads its owner token from) — an operator may remove any engine, so its
 * token is preferred; a runtime token is never sent, as it may not deregister.
 */
export type TokenRole = "runtime" | "reader" | "operator" | "owner-or-operator";

export function tokenFor(cmd: Command, role: TokenRole): string | undefined {
  const flag = cmd.getOptionValueSourceWithGlobals("token") === "cli" ? globals(cmd).token : undefined;
  const runtime = process.env.CONTEXTD_RUNTIME_TOKEN || undefined;
  const admin = process.env.CONTEXTD_ADMIN_TOKEN || undefined;
  if (flag) return flag;
  if (role === "owner-or-operator") return admin ?? (process.env.CONTEXTD_OWNER_TOKEN || undefined);
  if (role === "operator") return admin ?? runtime;
  if (role === "reader") return runtime ?? admin;
  return runtime;
}

/** {@link clientOptions} with the token chosen for `role` (see {@link tokenFor}). */
export function clientOptionsFor(cmd: Command, role: TokenRole, defaultTimeoutMs = 30_000): ClientOptions {
  return { ...clientOptions(globals(cmd), defaultTimeoutMs), token: tokenFor(cmd, role) };
}

/** Runs `fn` with a RegistryService client and closes it afterwards. */
export async function withRegistry<T>(options: ClientOptions, fn: (client: RegistryServiceClient) => Promise<T>): Promise<T> {
  const client = new RegistryServiceClient(options.address, channelCredentials(options), CHANNEL_OPTIONS);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
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
  return withRegistry(options, async (client) => (await callUnary(client, client.listEngines, ListEnginesRequest.fromPartial({}), options)).engines);
}

const HEALTH_STATUS = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
const HealthClient = makeGenericClientConstructor(healthService, "Health");

/** grpc.health.v1 Check for the whole server (`service: ""`): the status name, e.g. `SERVING`. */
export async function checkHealth(options: ClientOptions): Promise<string> {
  const client = new HealthClient(options.address, channelCredentials(options), CHANNEL_OPTIONS) as Client & Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const res = await callUnary<{ service: string }, { status: string | number }>(client, client.check as any, { service: "" }, options);
    return typeof res.status === "number" ? (HEALTH_STATUS[res.status] ?? String(res.status)) : String(res.status);
  } finally {
    client.close();
  }
}

/**
 * Wraps a command action: an error prints one line on stderr (`contextctl: CODE: details`) and
 * sets the exit code by what went wrong (exit-codes.ts: 1 failed, 2 usage, 3 unreachable). A
 * command that succeeds but has a failure to report (compact not ok) sets process.exitCode itself.
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      writeStderr(`contextctl: ${errorText(err)}\n`);
      process.exitCode = exitCodeFor(err);
    }
  };
}

/** Parses a positive integer option value (a commander argParser). */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer");
  return n;
}
