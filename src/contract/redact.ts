/**
 * Keeping secrets out of error messages and log lines: credentials in URLs, and values that read
 * as tokens where a name or a digest was expected (a token pasted into `token_sha256` or
 * `token_env`). An error names the field and the problem; it never repeats a value that may be a
 * secret.
 */

/**
 * Text (a URL, or a message or log line holding URLs) with the credentials of every URL hidden:
 * `scheme://user:***@host` when there is a password (the user kept when it reads as a user name),
 * `scheme://***@host` for a lone user part (which may be a token, as in `https://TOKEN@host`).
 * Textual, so it works on a URL that does not parse (a password holding `/` or `@`): the user
 * part runs from `://` to the last `@` of the word. It may hide more than credentials (a path
 * holding `@`), never less.
 */
export function redactUrlCredentials(text: string): string {
  return text
    .replace(/([A-Za-z][A-Za-z0-9+.-]*:\/\/)(\S*)@/g, (_all, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(":");
      if (colon < 0) return `${scheme}***@`;
      const user = userinfo.slice(0, colon);
      const shown = /^[A-Za-z0-9._%-]{1,64}$/.test(user) && !looksLikeToken(user) ? user : "***";
      return `${scheme}${shown}:***@`;
    })
    .replace(SECRET_QUERY_PARAMETER, "$1***");
}

/** A query parameter of a URL whose name says it holds a credential (`?api_key=…`, `&access_token=…`, `&sig=…`). */
const SECRET_QUERY_PARAMETER = /([?&][^=&#\s]*(?:token|key|secret|passw(?:or)?d|pwd|auth|credential|sig(?:nature)?)[^=&#\s]*=)[^&#\s"']*/gi;

/**
 * `text` with every word that reads as a token (looksLikeToken) replaced by `***`. A path's parts
 * (next to `/` or `\\`: a temp directory `contextd-config-ujVe0S…`) are left alone.
 */
export function redactTokens(text: string): string {
  return text.replace(TOKEN_WORD, (word) => (looksLikeToken(word) ? "***" : word));
}

const TOKEN_WORD = /(?<![A-Za-z0-9_\-+=.~/\\])[A-Za-z0-9_\-+=.~]{20,}(?![A-Za-z0-9_\-+=.~/\\])/g;

/**
 * Whether `value` reads as a secret rather than as a name, a path or a setting: one word of 20 or
 * more characters in a token alphabet (base64, base64url, hex, `_` `-` `.` `~`) that mixes upper-
 * and lower-case letters and digits, or 32 or more hex digits (a digest, or a hex token). A
 * heuristic for messages: a value it misses is still never echoed by the fields that hold secrets.
 */
export function looksLikeToken(value: string): boolean {
  if (value.length < 20 || !/^[A-Za-z0-9_\-+=.~]+$/.test(value)) return false;
  if (/^[0-9a-fA-F]{32,}$/.test(value)) return true;
  return /[a-z]/.test(value) && /[A-Z]/.test(value) && /[0-9]/.test(value);
}

/**
 * Whether `name` reads as an environment variable's name and not as a secret pasted in its place:
 * the POSIX name grammar (`[A-Za-z_][A-Za-z0-9_]*`, at most 128 characters), and no part between
 * `_`s that reads as key material — 20 or more characters (`AKIAIOSFODNN7EXAMPLE`), or 12 or more
 * mixing letters and digits — and not a token as a whole (`ghp_…`, see looksLikeToken). Names of
 * variables (`CONTEXTD_RUNTIME_TOKEN`, `OPENAI_API_KEY`) pass; what passes may be shown in a message.
 */
export function envNameProblem(name: string): string | undefined {
  const grammar = 'letters, digits and "_", not starting with a digit, at most 128 characters';
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) return `is not an environment variable name (${grammar}); the value is not shown`;
  const keyLike = (part: string) => part.length >= 20 || (part.length >= 12 && /[A-Za-z]/.test(part) && /[0-9]/.test(part));
  if (looksLikeToken(name) || name.split("_").some(keyLike))
    return "reads as a token, not as the name of an environment variable: put the token in a variable and name the variable here (the value is not shown)";
  return undefined;
}
