/** What a scenario is and what it reports. */
import type { Progress } from "./progress.js";

export interface ScenarioContext {
  /** `--quick`: a short version that asserts nothing about speed (CI). */
  quick: boolean;
  progress: Progress;
}

/** A goal on one reported key; `met` is decided by the runner. */
export interface Goal {
  key: string;
  op: "<=" | ">=" | "==";
  target: number;
}

export interface Table {
  title: string;
  headers: string[];
  rows: Array<Array<string | number | null>>;
}

export interface ScenarioResult {
  /** Every reported key (JSON values). Keys named in `goals` or `headline` go into the main table. */
  metrics: Record<string, unknown>;
  goals?: Goal[];
  /** Keys (besides the goal keys) that belong in the main table. */
  headline?: string[];
  /** How the scenario measured what it reports (and anything that limits the numbers). */
  notes?: string[];
  tables?: Table[];
}

export interface Scenario {
  name: string;
  /** One line: what it measures. */
  title: string;
  run(ctx: ScenarioContext): Promise<ScenarioResult>;
}

export function goalMet(goal: Goal, value: unknown): boolean | null {
  if (typeof value !== "number" || !Number.isFinite(value)) return null;
  switch (goal.op) {
    case "<=":
      return value <= goal.target;
    case ">=":
      return value >= goal.target;
    case "==":
      return value === goal.target;
  }
}

export function goalText(goal: Goal): string {
  return `${goal.op === "<=" ? "≤" : goal.op === ">=" ? "≥" : "="} ${goal.target}`;
}
