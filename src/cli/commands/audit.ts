import type { Command } from "commander";
import { AuditEvent, AuditServiceClient, ListAuditEventsRequest } from "../../contract/gen/contextd/v1/audit.js";
import { CHANNEL_OPTIONS, callUnary, channelCredentials } from "../../sdk/grpc-call.js";
import { examples, iso, printJson, table } from "../format.js";
import { action, clientOptionsFor, globals, positiveInt } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `contextctl audit [--since 24h|ISO] [--actor A] [--action X] [--limit N]`: the audit trail
 * (AuditService.ListAuditEvents), newest first, following pages up to `--limit` records.
 */
export function registerAudit(program: Command): void {
  program
    .command("audit")
    .description("show the audit trail: who registered, deregistered, isolated or released engines, deleted, imported or exported sessions, restored the store")
    .option("--since <when>", "records since a time ago (30m, 24h, 7d) or an ISO time (2026-12-01T00:00:00Z)")
    .option("--actor <actor>", "only this actor, exactly as shown (`operator ops`, `runtime web`, `config`)")
    .option(
      "--action <action>",
      "only this action (engine.register, engine.deregister, engine.isolate, engine.release, session.delete, session.import, session.export, store.restore, reservation.add, reservation.remove)",
    )
    .option("--limit <n>", "at most this many records", positiveInt, 100)
    .addHelpText(
      "after",
      "\nNeeds an operator token when contextd requires auth: --token TOKEN, else $CONTEXTD_ADMIN_TOKEN.\n" +
        'With --json: {"events": [AuditEvent, ...]} (proto JSON), newest first.\n' +
        examples("contextctl audit --since 24h", "contextctl audit --action session.delete --actor 'runtime web'"),
    )
    .action(
      action(async (opts: { since?: string; actor?: string; action?: string; limit: number }, cmd: Command) => {
        const options = clientOptionsFor(cmd, "operator");
        const sinceMs = opts.since ? parseSince(opts.since) : 0;
        const client = new AuditServiceClient(options.address, channelCredentials(options), CHANNEL_OPTIONS);
        const events: AuditEvent[] = [];
        try {
          let pageToken = "";
          do {
            const request = ListAuditEventsRequest.fromPartial({
              sinceMs,
              actor: opts.actor ?? "",
              action: opts.action ?? "",
              pageSize: Math.min(1000, opts.limit - events.length),
              pageToken,
            });
            const page = await callUnary(client, client.listAuditEvents, request, options);
            events.push(...page.events);
            pageToken = page.nextPageToken;
          } while (pageToken && events.length < opts.limit);
        } finally {
          client.close();
        }
        if (globals(cmd).json) return printJson({ events: events.map((e) => AuditEvent.toJSON(e)) });
        if (events.length === 0) return void writeStdout("no audit records\n");
        const rows = events.map((e) => [
          iso(e.atMs),
          terminalText(e.actor),
          terminalText(e.action),
          terminalText(e.target),
          terminalText(e.outcome),
          terminalText(e.peer || "-"),
        ]);
        writeStdout(`${table(["time", "actor", "action", "target", "outcome", "from"], rows)}\n`);
      }),
    );
}

/** `30m`, `24h`, `7d` ago, or an ISO time, as epoch ms. */
function parseSince(text: string): number {
  const ago = /^(\d+)([mhd])$/.exec(text.trim());
  if (ago) return Date.now() - Number(ago[1]) * UNIT_MS[ago[2]];
  const at = Date.parse(text);
  if (Number.isNaN(at)) throw new Error(`--since ${JSON.stringify(text)}: use 30m, 24h, 7d or an ISO time`);
  return at;
}
