import cliProgress from "cli-progress";

export interface Progress {
  update(value: number, payload?: Record<string, string>): void;
  setTotal(total: number): void;
  stop(): void;
}

const NONE: Progress = { update() {}, setTotal() {}, stop() {} };

export interface ProgressOptions {
  /** cli-progress format, e.g. `transcript [{bar}] {value}/{total} entries`. */
  format: string;
  total: number;
  payload?: Record<string, string>;
  /**
   * Wait this long before drawing anything (default 300 ms): a command that finishes quickly
   * leaves no flicker of a bar on the terminal.
   */
  delayMs?: number;
  /** false: no bar (e.g. JSON lines streaming to the same terminal would tear it). Default true. */
  enabled?: boolean;
}

/**
 * A progress bar on stderr for long work — only when stderr is a terminal, so stdout (what
 * scripts parse) and piped or redirected stderr never carry one. The bar is cleared when done.
 */
export function progress(opts: ProgressOptions): Progress {
  if (!process.stderr.isTTY || opts.enabled === false) return NONE;
  let total = opts.total;
  let value = 0;
  let payload = opts.payload ?? {};
  let bar: cliProgress.SingleBar | undefined;
  const timer = setTimeout(() => {
    bar = new cliProgress.SingleBar(
      { stream: process.stderr, format: opts.format, hideCursor: true, clearOnComplete: true, etaBuffer: 20 },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, value, payload);
  }, opts.delayMs ?? 300);
  // Never keeps the process alive by itself.
  timer.unref();
  return {
    update(v, p) {
      value = v;
      if (p) payload = { ...payload, ...p };
      bar?.update(v, payload);
    },
    setTotal(t) {
      total = t;
      bar?.setTotal(t);
    },
    stop() {
      clearTimeout(timer);
      bar?.stop();
      bar = undefined;
    },
  };
}
