import { InvalidArgumentError, type Command } from "commander";
import { SearchHit, SearchOrder, SearchScope } from "../../contract/gen/contextd/v1/search.js";
import { roleToJSON } from "../../contract/gen/contextd/v1/types.js";
import { examples, printJson, table, type Cell } from "../format.js";
import { bold, colourEnabled } from "../style.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface SearchOptions {
  agent?: boolean;
  relevance?: boolean;
  limit: number;
}

/** SearchTranscript answers at most 100 hits a page. */
const MAX_PAGE = 100;

/**
 * `contextctl search ID QUERY…`: SessionService.SearchTranscript (proto/contextd/v1/search.proto):
 * the session's whole history — compacted and hidden entries included — or every session of its
 * agent (`--agent`), newest first or by relevance, following page tokens until `--limit` hits.
 */
export function registerSearch(program: Command): void {
  program
    .command("search")
    .description("search a session's whole history (compacted entries included) for words, paths, ids and error strings")
    .argument("<id>", "session id")
    .argument("<query...>", 'words and "quoted phrases", all required; punctuation splits words (invoice_rounding.ts, BILL-4821)')
    .option("--agent", "search every session of the session's agent")
    .option("--relevance", "best matches first (among the 1000 newest matches), not newest first")
    .option("--limit <n>", "at most this many hits", limit, 20)
    .addHelpText(
      "after",
      "\nEach hit: session, seq, entry id, type (a message's role, or compaction for a summary), score, and a snippet\n" +
        "with every match between « and » (shown in bold on a colour terminal). Words match whole, without case or accents.\n" +
        "With --json: {hits: [SearchHit (proto JSON)…]} in the order shown.\n" +
        examples(
          "contextctl search chat-42 invoice_rounding.ts",
          'contextctl search chat-42 "BILL-4821" --agent --relevance',
          "contextctl --json search chat-42 ENOENT | jq -r '.hits[].entryId'",
        ),
    )
    .action(
      action(async (id: string, words: string[], opts: SearchOptions, cmd: Command) => {
        const g = globals(cmd);
        const query = words.join(" ");
        const hits: SearchHit[] = [];
        await withSessions(clientOptions(g), async (client) => {
          let pageToken = "";
          do {
            const page = await client.searchTranscript({
              session: { sessionId: id },
              query,
              scope: opts.agent ? SearchScope.SEARCH_SCOPE_AGENT : SearchScope.SEARCH_SCOPE_SESSION,
              order: opts.relevance ? SearchOrder.SEARCH_ORDER_RELEVANCE : SearchOrder.SEARCH_ORDER_NEWEST,
              pageSize: Math.min(MAX_PAGE, opts.limit - hits.length),
              pageToken,
            });
            hits.push(...page.hits);
            pageToken = page.nextPageToken;
          } while (pageToken && hits.length < opts.limit);
        });
        if (g.json) return printJson({ hits: hits.map((h) => SearchHit.toJSON(h)) });
        if (hits.length === 0) return void writeStdout("no hits\n");
        const rows: Cell[][] = hits.map((h) => [
          terminalText(h.sessionId),
          h.seq,
          terminalText(h.entryId),
          h.compaction
            ? "compaction"
            : roleToJSON(h.role)
                .replace(/^ROLE_/, "")
                .toLowerCase(),
          h.score.toFixed(3),
          marked(terminalText(h.snippet)),
        ]);
        writeStdout(`${table(["session", "seq", "id", "type", "score", "snippet"], rows, ["left", "right", "left", "left", "right", "left"])}\n`);
      }),
    );
}

/** The snippet's «matches» in bold on a colour terminal (markers kept otherwise). */
function marked(snippet: string): string {
  return colourEnabled() ? snippet.replace(/«([^»]*)»/g, (_, m: string) => bold(m)) : snippet;
}

function limit(value: string): number {
  const n = positiveInt(value);
  if (n > 10_000) throw new InvalidArgumentError("at most 10000");
  return n;
}
