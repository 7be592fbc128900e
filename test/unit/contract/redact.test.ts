import { describe, expect, it } from "vitest";
import { envNameProblem, looksLikeToken, redactTokens, redactUrlCredentials } from "../../../src/contract/redact.js";

describe("redact: secrets kept out of messages", () => {
  it("URL credentials are hidden, also in URLs that do not parse and inside longer text", () => {
    expect(redactUrlCredentials("postgres://u:secret@db/x")).toBe("postgres://u:***@db/x");
    expect(redactUrlCredentials("postgres://u:p@ss/w@rd@db:bad/x")).toBe("postgres://u:***@db:bad/x");
    expect(redactUrlCredentials("https://ghp_abcDEF0123456789abcdEF@github.com/x")).toBe("https://***@github.com/x");
    expect(redactUrlCredentials('{"url":"http://a:b@h:1/"} and http://h/ok')).toBe('{"url":"http://a:***@h:1/"} and http://h/ok');
    expect(redactUrlCredentials("http://collector:4318/v1/traces")).toBe("http://collector:4318/v1/traces");
  });

  it("environment variable names pass; token-like values and non-names do not", () => {
    for (const name of ["CONTEXTD_RUNTIME_TOKEN", "OPENAI_API_KEY", "A", "_x", "PGPASSWORD", "RT2"]) expect(envNameProblem(name), name).toBeUndefined();
    for (const value of ["ghp_16C7e42F292c6912E7710c838347Ae178B4a", "AKIAIOSFODNN7EXAMPLE", "abcdef0123456789abcdef0123456789", "TOKEN_a1b2c3d4e5f6"])
      expect(envNameProblem(value), value).toMatch(/reads as a token/);
    for (const value of ["not a name", "1ABC", "a-b", "x".repeat(129)]) expect(envNameProblem(value), value).toMatch(/not an environment variable name/);
    expect(looksLikeToken("lossless-engine")).toBe(false);
  });
});

describe("redact: query credentials and token-like words", () => {
  it("a query parameter named for a credential is hidden; others stay", () => {
    expect(redactUrlCredentials("https://otel.example/v1/traces?api_key=abc123&region=eu")).toBe("https://otel.example/v1/traces?api_key=***&region=eu");
    expect(redactUrlCredentials("http://h/x?access_token=zzz#frag")).toBe("http://h/x?access_token=***#frag");
  });

  it("words that read as tokens are replaced; ordinary words, ids and paths stay", () => {
    expect(redactTokens('is "ghp_16C7e42F292c6912E7710c838347Ae178B4a" in the file')).toBe('is "***" in the file');
    expect(redactTokens("engine lossless-summarizer at /var/run/contextd-engines/a.sock")).toBe(
      "engine lossless-summarizer at /var/run/contextd-engines/a.sock",
    );
  });
});

it("redactTokens leaves path parts alone", () => {
  expect(redactTokens('cannot read "/tmp/contextd-config-ujVe0S1234abcd/missing.pem"')).toBe('cannot read "/tmp/contextd-config-ujVe0S1234abcd/missing.pem"');
});
