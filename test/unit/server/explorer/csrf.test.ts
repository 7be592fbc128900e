import { describe, expect, it } from "vitest";
import { CsrfTokens } from "../../../../src/server/explorer/csrf.js";

describe("CsrfTokens", () => {
  it("accepts the token issued for the same credential, in this process only", () => {
    const csrf = new CsrfTokens();
    expect(csrf.verify("operator-token", csrf.issue("operator-token"))).toBe(true);
    expect(csrf.verify("", csrf.issue(""))).toBe(true);
    // Another process (another key) issued it: refused.
    expect(csrf.verify("operator-token", new CsrfTokens().issue("operator-token"))).toBe(false);
  });

  it("refuses a token issued for another credential, a missing one and a forged one", () => {
    const csrf = new CsrfTokens();
    expect(csrf.verify("operator-token", csrf.issue("runtime-token"))).toBe(false);
    expect(csrf.verify("operator-token", csrf.issue(""))).toBe(false);
    expect(csrf.verify("operator-token", undefined)).toBe(false);
    expect(csrf.verify("operator-token", "")).toBe(false);
    expect(csrf.verify("operator-token", "x".repeat(43))).toBe(false);
  });
});
