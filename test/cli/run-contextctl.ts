import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { resolve } from "node:path";

/**
 * Runs the built contextctl (`npx tsc -p tsconfig.json` first) as a child process, stdout and
 * stderr piped — so, as for a script, neither is a terminal. The child gets this process's
 * environment without CONTEXTD_* (a developer's shell must not point it elsewhere) and without
 * FORCE_COLOR / NO_COLOR (tests that parse output expect none; colour tests set them), plus `env`.
 */
export const CONTEXTCTL = resolve(import.meta.dirname, "../../bin/contextctl.js");

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = { ...process.env };
  for (const key of Object.keys(base)) if (key.startsWith("CONTEXTD_") || key === "FORCE_COLOR" || key === "NO_COLOR") delete base[key];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CONTEXTCTL, ...args], { env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let [stdout, stderr] = ["", ""];
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** `contextctl --address ADDRESS ...args`. */
export function contextctl(address: string, ...args: string[]): Promise<Run> {
  return run(["--address", address, ...args]);
}

/** A port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return new Promise((r) => server.close(() => r(port)));
}

/** Cells of the data rows of each boxed table in `out` (rows starting with │, headers excluded), table by table. */
export function tables(out: string): string[][][] {
  const found: string[][][] = [];
  let current: string[][] | undefined;
  for (const line of out.split("\n")) {
    if (line.startsWith("┌")) current = [];
    else if (line.startsWith("└") && current) {
      found.push(current.slice(1));
      current = undefined;
    } else if (line.startsWith("│") && current)
      current.push(
        line
          .split("│")
          .slice(1, -1)
          .map((c) => c.trim()),
      );
  }
  return found;
}

/** Cells of the data rows of every table in `out`, all tables together. */
export function tableRows(out: string): string[][] {
  return tables(out).flat();
}

export const int = (cell: string) => Number(cell.replace(/[,~]/g, ""));

/** Parses JSON Lines. */
export const jsonLines = (out: string) =>
  out
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

export const ANSI = /\u001b\[[0-9;]*m/;
