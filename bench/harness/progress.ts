/**
 * Progress of a bench run on stderr: a cli-progress bar per scenario when stderr is a terminal,
 * otherwise (CI logs, redirected output) one plain line per phase change.
 */
import cliProgress from "cli-progress";

export interface Progress {
  /** `done` of `total` steps, and what is being done now. */
  update(done: number, total: number, phase?: string): void;
  /** A line above the bar (notes, warnings). */
  log(message: string): void;
  stop(): void;
}

export function createProgress(scenario: string, index: number, count: number): Progress {
  const label = `[${index}/${count}] ${scenario}`;
  const started = Date.now();
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: `${label.padEnd(34)} {bar} {percentage}% | {duration_formatted} | {phase}`,
        stream: process.stderr,
        hideCursor: true,
        clearOnComplete: false,
        barsize: 24,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(1000, 0, { phase: "starting" });
    return {
      update(done, total, phase) {
        bar.update(Math.round((1000 * Math.min(done, total)) / Math.max(1, total)), phase === undefined ? {} : { phase });
      },
      log(message) {
        process.stderr.write(`\r\x1b[K${label}: ${message}\n`);
        bar.render();
      },
      stop() {
        bar.update(1000, { phase: "done" });
        bar.stop();
      },
    };
  }
  let lastPhase = "";
  let lastTenth = -1;
  process.stderr.write(`${label}: starting\n`);
  const secs = () => ((Date.now() - started) / 1000).toFixed(1);
  return {
    update(done, total, phase) {
      const tenth = Math.floor((10 * Math.min(done, total)) / Math.max(1, total));
      if ((phase !== undefined && phase !== lastPhase) || tenth !== lastTenth) {
        lastPhase = phase ?? lastPhase;
        lastTenth = tenth;
        process.stderr.write(`${label}: ${tenth * 10}% ${lastPhase} (${secs()} s)\n`);
      }
    },
    log(message) {
      process.stderr.write(`${label}: ${message}\n`);
    },
    stop() {
      process.stderr.write(`${label}: done in ${secs()} s\n`);
    },
  };
}
