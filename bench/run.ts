/**
 * `npm run bench` — contextd's benchmarks (see docs/performance.md).
 *
 *   node dist/bench/run.js [--quick] [--only NAME[,NAME]] [--json FILE] [--list]
 *
 * Runs every scenario (or the `--only` subset) in order with a progress display on stderr, prints a
 * Markdown report on stdout, and with `--json FILE` writes
 * `{ date, machine, node, quick, seconds, scenarios: { NAME: { ...metrics, goals, notes, tables } } }`.
 * `--quick` is the short version CI runs: it asserts nothing about speed. The exit code is 1 only
 * when a scenario could not run (crashed); a missed goal is reported, not an error.
 */
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { createProgress } from "./harness/progress.js";
import { jsonReport, machine, markdownReport, type ScenarioOutcome } from "./harness/report.js";
import { SCENARIOS } from "./scenarios/index.js";

function usage(): string {
  return `usage: npm run bench -- [--quick] [--only NAME[,NAME]] [--json FILE] [--list]\nscenarios: ${SCENARIOS.map((s) => s.name).join(", ")}`;
}

async function main(): Promise<number> {
  let values: { quick?: boolean; only?: string; json?: string; list?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: {
        quick: { type: "boolean" },
        only: { type: "string" },
        json: { type: "string" },
        list: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n${usage()}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  if (values.list) {
    for (const s of SCENARIOS) process.stdout.write(`${s.name.padEnd(22)} ${s.title}\n`);
    return 0;
  }
  let selected = SCENARIOS;
  if (values.only) {
    const names = values.only
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
    if (unknown.length) {
      process.stderr.write(`bench: unknown scenario ${unknown.map((u) => `"${u}"`).join(", ")}\n${usage()}\n`);
      return 2;
    }
    selected = SCENARIOS.filter((s) => names.includes(s.name));
  }

  const quick = values.quick ?? false;
  const date = new Date().toISOString();
  const mach = machine();
  const started = performance.now();
  const outcomes: ScenarioOutcome[] = [];
  for (const [i, scenario] of selected.entries()) {
    const progress = createProgress(scenario.name, i + 1, selected.length);
    const t0 = performance.now();
    try {
      const result = await scenario.run({ quick, progress });
      outcomes.push({ scenario, result, seconds: (performance.now() - t0) / 1000 });
    } catch (err) {
      const message = err instanceof Error ? err.message.split("\n")[0] : String(err);
      progress.log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      outcomes.push({ scenario, error: message, seconds: (performance.now() - t0) / 1000 });
    } finally {
      progress.stop();
    }
  }
  const header = { date, machine: mach, node: process.version, quick, seconds: (performance.now() - started) / 1000 };
  process.stdout.write(markdownReport(outcomes, header));
  if (values.json) {
    const file = path.resolve(values.json);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${JSON.stringify(jsonReport(outcomes, header), null, 2)}\n`);
    process.stderr.write(`bench: wrote ${file}\n`);
  }
  return outcomes.some((o) => o.error) ? 1 : 0;
}

process.exitCode = await main();
// Sidecars and contextd processes are killed on exit (harness/processes.ts); gRPC channels may
// still hold the event loop open.
process.exit(process.exitCode);
