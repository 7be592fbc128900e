// Small formatting helpers. Everything tenant-controlled reaches the page through lit-html's
// text bindings (`${value}` in a template), which set text, never markup.

export function when(ms: number | string | undefined): string {
  const n = Number(ms ?? 0);
  return n > 0
    ? new Date(n)
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d+Z$/, "Z")
    : "-";
}

export function num(n: number | string | undefined): string {
  return Number(n ?? 0).toLocaleString("en-US");
}

/** `ENGINE_HEALTH_SERVING` → `serving`. */
export function enumName(v: string | undefined, prefix: string): string {
  return (v ?? "").replace(prefix, "").toLowerCase() || "-";
}
