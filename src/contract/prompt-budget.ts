/**
 * The prompt budget of a compaction: what the active view may occupy once room for the model's
 * answer (`reserve_tokens`) is set aside.
 *
 * The reserve is never allowed to eat the window: the prompt budget is at least
 * min(8 000, half the window), and never more than the window itself (docs/concepts.md, "Budgets").
 */
export const MIN_PROMPT_BUDGET_TOKENS = 8000;

export function promptBudget(tokenBudget: number, reserveTokens: number): number {
  const window = Number.isFinite(tokenBudget) && tokenBudget > 0 ? Math.floor(tokenBudget) : 0;
  const reserve = Number.isFinite(reserveTokens) && reserveTokens > 0 ? Math.floor(reserveTokens) : 0;
  const floor = Math.min(MIN_PROMPT_BUDGET_TOKENS, Math.floor(window / 2));
  return Math.min(window, Math.max(window - reserve, floor));
}
