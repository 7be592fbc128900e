/** Memory of a process from /proc/PID/status (Linux): VmHWM is the peak resident set, VmRSS the current one. */
import fs from "node:fs";

export interface Rss {
  /** Peak resident set size, MiB. */
  hwmMb: number;
  /** Current resident set size, MiB. */
  rssMb: number;
}

/** Reads VmHWM and VmRSS of `pid`; undefined when /proc is not available (not Linux) or the process is gone. */
export function readRss(pid: number): Rss | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined;
  }
  const kb = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
    return m ? Number(m[1]) : Number.NaN;
  };
  return { hwmMb: kb("VmHWM") / 1024, rssMb: kb("VmRSS") / 1024 };
}

/** Linux's USER_HZ: /proc/PID/stat counts CPU time in ticks of 1/100 s. */
const TICKS_PER_S = 100;

/**
 * CPU time (user + system) `pid` has used so far, in ms (10 ms resolution), from /proc/PID/stat;
 * NaN when it cannot be read. For the bench process itself prefer process.cpuUsage().
 */
export function readCpuMs(pid: number): number {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return Number.NaN;
  }
  // The command name (field 2) may hold spaces and parentheses: fields after it follow the last ")".
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
  return ((Number(rest[11]) + Number(rest[12])) * 1000) / TICKS_PER_S;
}

/** CPU ms of the bench process itself (user + system). */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
