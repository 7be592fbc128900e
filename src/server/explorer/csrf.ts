import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * The explorer's CSRF check for actions (isolate, release, deregister, compact). The browser sends
 * the bearer token itself (an `Authorization` header a cross-site form cannot set), but with
 * `auth.required: false` there is no token, so every action also needs `x-csrf-token`: an HMAC of
 * the caller's credential under a key made at start, which `GET /explorer/api/info` hands out. A
 * page on another origin cannot read that answer (no CORS headers), nor send a custom header without
 * a preflight contextd does not answer. The key lives in this process only: a restart invalidates
 * the tokens (the page fetches a new one).
 */
export class CsrfTokens {
  private readonly key = randomBytes(32);

  /** The token for the credential `bearer` ("" when none is presented). */
  issue(bearer: string): string {
    return createHmac("sha256", this.key).update(`contextd-explorer-csrf\0${bearer}`).digest("base64url");
  }

  verify(bearer: string, presented: string | undefined): boolean {
    if (!presented) return false;
    const want = Buffer.from(this.issue(bearer));
    const got = Buffer.from(presented);
    return got.length === want.length && timingSafeEqual(got, want);
  }
}
