/** Rendering a bench run: the Markdown report (main table + per-scenario details) and the JSON file. */
import os from "node:os";
import { goalMet, goalText, type Scenario, type ScenarioResult, type Table } from "./scenario.js";

export interface ScenarioOutcome {
  scenario: Scenario;
  result?: ScenarioResult;
  error?: string;
  seconds: number;
}

export interface Machine {
  cpus: number;
  cpu_model: string;
  memory_gb: number;
  os: string;
  load_average_at_start: number[];
}

export function machine(): Machine {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model ?? "unknown",
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    load_average_at_start: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export function formatValue(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000);
  if (typeof v === "string" || typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return v.map(formatValue).join(", ");
  if (typeof v === "object")
    return Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${k} ${formatValue(x)}`)
      .join(", ");
  return String(v);
}

const cell = (v: unknown) => formatValue(v).replace(/\|/g, "\\|");

export function markdownTable(headers: string[], rows: unknown[][]): string {
  const lines = [`| ${headers.join(" | ")} |`, `|${headers.map(() => "---").join("|")}|`];
  for (const r of rows) lines.push(`| ${r.map(cell).join(" | ")} |`);
  return lines.join("\n");
}

/** The main table: every goal key and headline key of every scenario, with the goal and met/missed. */
export function mainTable(outcomes: ScenarioOutcome[]): string {
  const rows: unknown[][] = [];
  for (const o of outcomes) {
    const name = o.scenario.name;
    if (!o.result) {
      rows.push([name, "error", o.error ?? "failed", "", "error"]);
      continue;
    }
    for (const g of o.result.goals ?? []) {
      const value = o.result.metrics[g.key];
      const met = goalMet(g, value);
      rows.push([name, g.key, value, goalText(g), met === null ? "n/a" : met ? "met" : "missed"]);
    }
    for (const k of o.result.headline ?? []) rows.push([name, k, o.result.metrics[k], "", ""]);
  }
  return markdownTable(["scenario", "metric", "value", "goal", "met/missed"], rows);
}

function tableText(t: Table): string {
  return `**${t.title}**\n\n${markdownTable(t.headers, t.rows)}`;
}

export function markdownReport(outcomes: ScenarioOutcome[], header: { date: string; machine: Machine; node: string; quick: boolean; seconds: number }): string {
  const m = header.machine;
  const parts = [
    `## contextd benchmarks — ${header.date}${header.quick ? " (--quick)" : ""}`,
    "",
    `Machine: ${m.cpus} × ${m.cpu_model}, ${m.memory_gb} GB, ${m.os}; Node ${header.node}; load average at start ${m.load_average_at_start.join(" ")}; run took ${Math.round(header.seconds)} s.`,
    "",
    mainTable(outcomes),
  ];
  for (const o of outcomes) {
    parts.push("", `### ${o.scenario.name} (${Math.round(o.seconds)} s)`, "", o.scenario.title + ".");
    if (o.error) {
      parts.push("", `**Error:** ${o.error}`);
      continue;
    }
    for (const t of o.result?.tables ?? []) parts.push("", tableText(t));
    const notes = o.result?.notes ?? [];
    if (notes.length) parts.push("", ...notes.map((n) => `- ${n}`));
  }
  return parts.join("\n") + "\n";
}

export function jsonReport(outcomes: ScenarioOutcome[], header: { date: string; machine: Machine; node: string; quick: boolean; seconds: number }): unknown {
  const scenarios: Record<string, unknown> = {};
  for (const o of outcomes) {
    if (!o.result) {
      scenarios[o.scenario.name] = { error: o.error, seconds: Math.round(o.seconds) };
      continue;
    }
    const goals = Object.fromEntries(
      (o.result.goals ?? []).map((g) => {
        const met = goalMet(g, o.result!.metrics[g.key]);
        return [g.key, { goal: goalText(g), met }];
      }),
    );
    scenarios[o.scenario.name] = { ...o.result.metrics, goals, notes: o.result.notes ?? [], tables: o.result.tables ?? [], seconds: Math.round(o.seconds) };
  }
  return { date: header.date, machine: header.machine, node: header.node, quick: header.quick, seconds: Math.round(header.seconds), scenarios };
}
