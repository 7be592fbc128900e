import { status as Status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import type { Command } from "commander";
import {
  EngineEvent,
  EngineStatus,
  RegistryServiceClient,
  WatchEnginesRequest,
  type EngineInstance,
  type WatchEnginesResponse,
} from "../../contract/gen/contextd/v1/registry.js";
import { outgoingMetadata } from "../../contract/metadata.js";
import { CHANNEL_OPTIONS, channelCredentials, type ClientOptions } from "../../sdk/grpc-call.js";
import { engineState, eventLine, examples, healthName, printJson, table } from "../format.js";
import { bad, good, tone } from "../style.js";
import type { Align } from "../table.js";
import { action, clientOptionsFor, globals, listEngines } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

/**
 * `contextctl engines`: RegistryService.ListEngines as a table; `contextctl engines watch`:
 * RegistryService.WatchEngines, one line per event. Both read the registry, so any runtime, owner
 * or operator token will do (--token, else $CONTEXTD_RUNTIME_TOKEN, else $CONTEXTD_ADMIN_TOKEN).
 */
export function registerEngines(program: Command): void {
  const engines = program
    .command("engines")
    .description("list registered engines (legacy included): routed to or quarantined, health, call counters; `engines watch` streams events")
    .addHelpText(
      "after",
      "\nThe state column says whether sessions are routed to the engine: `active`, or quarantined — its calls go\n" +
        "to legacy — as `quarantined (manual: REASON)` for an operator's isolate (held until `contextctl release ID`),\n" +
        "`quarantined until 14:03:10 (OPERATION: REASON)` for an automatic one (e.g. `assemble: deadline: ...`; the\n" +
        "earliest release, local time, then a passing health check releases it), or `quarantined until a health check\n" +
        "passes (...)` once that time is past. The health column is the last health check's answer, whatever the state.\n" +
        "fallbacks counts the calls routed to the engine that legacy answered, also while it was quarantined; the last\n" +
        "column says why, most frequent first (quarantined, not_registered, error, timeout, contract, rejected, short).\n" +
        "An engine served by several instances says how many serve in the endpoint column (`3 instances, 2 serving`)\n" +
        "and lists each under it: its id, where it runs (`local` to this contextd, else its replica or node), its\n" +
        "endpoint, its own state and health, and this contextd's calls to it. Counters are the answering contextd's.\n" +
        'With --json: {"engines": [EngineStatus, ...]} (proto JSON; a quarantined engine has its "quarantine" record).\n' +
        examples("contextctl engines", "contextctl --json engines | jq -r '.engines[] | select(.quarantine) | .engineId'"),
    )
    .action(
      action(async (_opts: unknown, cmd: Command) => {
        const g = globals(cmd);
        const list = await listEngines(clientOptionsFor(cmd, "reader"));
        if (g.json) return printJson({ engines: list.map((e) => EngineStatus.toJSON(e)) });
        const now = Date.now();
        const rows = list.flatMap((e) => {
          const several = e.instances.length > 1;
          const engineRow = [
            terminalText(e.engineId),
            terminalText(e.owner),
            e.builtin ? "(in process)" : several ? instancesSummary(e) : terminalText(e.endpoint) || "-",
            e.quarantine ? bad(engineState(e, now)) : good(engineState(e, now)),
            tone(healthName(e.health)),
            e.calls,
            e.failures,
            e.fallbacks,
            e.timeouts,
            fallbackReasons(e),
          ];
          if (!several) return [engineRow];
          return [engineRow, ...e.instances.map((i, n) => instanceRow(i, n === e.instances.length - 1, now))];
        });
        const head = ["id", "owner", "endpoint", "state", "health", "calls", "failures", "fallbacks", "timeouts", "fell back because"];
        // The counters right-aligned, though an instance row has no fallbacks of its own (blank).
        const aligns = head.map((_, i) => (i >= 5 && i <= 8 ? "right" : "left") as Align);
        writeStdout(`${table(head, rows, aligns)}\n`);
      }),
    );

  engines
    .command("watch")
    .description("stream registry events (registered, deregistered, health changed, quarantined, released) until Ctrl-C")
    .option("--current", "first one REGISTERED event per known engine, then live events")
    .addHelpText(
      "after",
      '\nOne line per event: ISO-TIME TYPE ID owner=OWNER health=HEALTH quarantine=none|"OPERATION: REASON" message="..."\n' +
        "(logfmt: values with spaces are JSON-quoted). With --json, one EngineEvent as JSON per line.\n" +
        "Ctrl-C cancels the stream and exits 0; if the server ends the stream with an error, exits 1 with its status\n" +
        "(3 when contextd cannot be reached).\n" +
        examples("contextctl engines watch --current", "contextctl --json engines watch | jq -c 'select(.type == \"ENGINE_EVENT_TYPE_QUARANTINED\")'"),
    )
    .action(
      action(async (opts: { current?: boolean }, cmd: Command) => {
        const g = globals(cmd);
        const write = g.json
          ? (ev: EngineEvent) => writeStdout(`${JSON.stringify(EngineEvent.toJSON(ev))}\n`)
          : (ev: EngineEvent) => writeStdout(`${eventLine(ev)}\n`);
        await watchEngines(clientOptionsFor(cmd, "reader"), Boolean(opts.current), write);
      }),
    );
}

/**
 * Streams WatchEngines into `onEvent` until SIGINT/SIGTERM (resolves: the stream is cancelled) or
 * the server ends the stream (resolves on OK, rejects with the status error otherwise). No deadline.
 */
async function watchEngines(options: ClientOptions, includeCurrent: boolean, onEvent: (ev: EngineEvent) => void): Promise<void> {
  const client = new RegistryServiceClient(options.address, channelCredentials(options), CHANNEL_OPTIONS);
  const metadata = outgoingMetadata({ token: options.token });
  const stream = client.watchEngines(WatchEnginesRequest.fromPartial({ includeCurrent }), metadata);
  let interrupted = false;
  const stop = (): void => {
    if (interrupted) process.exit(130); // a second Ctrl-C: do not wait any longer
    interrupted = true;
    stream.cancel();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    await new Promise<void>((resolve, reject) => {
      let error: ServiceError | undefined;
      stream.on("data", (res: WatchEnginesResponse) => res.event && onEvent(res.event));
      stream.on("error", (err: ServiceError) => (error = err));
      stream.on("status", (s: StatusObject) => {
        if (s.code === Status.OK || interrupted) resolve();
        else reject(error ?? Object.assign(new Error(s.details), { code: s.code, details: s.details, metadata: s.metadata }));
      });
    });
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    client.close();
  }
}

/** `3 instances, 2 serving`: an engine's instances, and those not quarantined. */
function instancesSummary(e: EngineStatus): string {
  const serving = e.instances.filter((i) => !i.quarantine).length;
  return `${e.instances.length} instances, ${serving} serving`;
}

/** One instance under its engine's row: `├ ID`, where it runs, its endpoint, state, health and counters. */
function instanceRow(i: EngineInstance, last: boolean, now: number): Array<string | number> {
  const where = i.local ? "local" : i.locality?.replica ? `replica ${i.locality.replica}` : i.locality?.node ? `node ${i.locality.node}` : "-";
  return [
    `${last ? "└" : "├"} ${terminalText(i.instanceId)}`,
    terminalText(where),
    terminalText(i.endpoint),
    i.quarantine ? bad(engineState(i, now)) : good(engineState(i, now)),
    tone(healthName(i.health)),
    i.calls,
    i.failures,
    "",
    i.timeouts,
    i.outstandingCalls > 0 ? `${i.outstandingCalls} in flight` : "",
  ];
}

/** `quarantined 12, timeout 1`: an engine's fallbacks by reason, most frequent first; `-` for none. */
function fallbackReasons(e: EngineStatus): string {
  const counts = Object.entries(e.fallbacksByReason).filter(([, n]) => n > 0);
  if (counts.length === 0) return "-";
  return counts
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([reason, n]) => `${terminalText(reason)} ${n.toLocaleString("en-US")}`)
    .join(", ");
}
