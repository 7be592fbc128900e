// The explorer's one path to contextd: its JSON API (/explorer/api/), with the bearer token the
// viewer typed (kept in this tab's sessionStorage only) and, for actions, the CSRF token the API
// hands out for that credential.

const TOKEN_KEY = "contextd-explorer-token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Info {
  authRequired: boolean;
  operator: boolean;
  csrfToken: string;
}

let info: Info | undefined;

export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(value: string): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  info = undefined;
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const t = token();
  return { accept: "application/json", ...(t ? { authorization: `Bearer ${t}` } : {}), ...extra };
}

async function answer<T>(res: Response): Promise<T> {
  const body = (await res.json().catch(() => ({ code: "HTTP_" + res.status, message: res.statusText }))) as { code?: string; message?: string };
  if (!res.ok) throw new ApiError(res.status, body.code ?? String(res.status), body.message ?? "");
  return body as T;
}

export async function get<T>(path: string, params: Record<string, string | number | undefined> = {}): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const qs = q.toString();
  return answer<T>(await fetch(`/explorer/api/${path}${qs ? `?${qs}` : ""}`, { headers: headers(), credentials: "omit" }));
}

export async function whoami(): Promise<Info> {
  return (info ??= await get<Info>("info"));
}

/** An action (POST with the CSRF token). */
export async function act<T>(path: string, body: Record<string, unknown>): Promise<T> {
  const { csrfToken } = await whoami();
  const res = await fetch(`/explorer/api/${path}`, {
    method: "POST",
    headers: headers({ "content-type": "application/json", "x-csrf-token": csrfToken }),
    body: JSON.stringify(body),
    credentials: "omit",
  });
  return answer<T>(res);
}

/** A path segment (ids hold any character). */
export function seg(id: string): string {
  return encodeURIComponent(id);
}

/**
 * Server-sent events read with fetch (EventSource cannot send the bearer header): calls `onData`
 * with each `data:` JSON and resolves with the `end` event's body when the stream ends.
 */
export async function streamEvents(path: string, signal: AbortSignal, onData: (data: unknown) => void): Promise<{ code: string; message: string }> {
  const res = await fetch(`/explorer/api/${path}`, { headers: headers({ accept: "text/event-stream" }), signal, credentials: "omit" });
  if (!res.ok || !res.body) return answer(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { code: "CLOSED", message: "the stream closed" };
    buffer += value;
    let at: number;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length === 0) continue;
      const parsed = JSON.parse(data.join("\n")) as unknown;
      if (event === "end") return parsed as { code: string; message: string };
      onData(parsed);
    }
  }
}
