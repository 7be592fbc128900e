/**
 * A background loop of one process (the subagent and retention sweeps, forget deliveries): one run at
 * a time, the next scheduled when the last has ended (a slow run never overlaps the next), a failed
 * run reported and tried again at the next interval, `kick()` to run now — or once more right after
 * the run in progress — and `stop()`, which aborts `signal` (a run in progress ends early) and waits
 * for the run in progress. Its timer never keeps the process alive.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private readonly stopping = new AbortController();

  constructor(
    private readonly run: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Aborted once `stop()` is called: a run checks it between steps. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  /** Schedules the first run (in `firstInMs`, by default an interval), unless started or stopped. */
  start(firstInMs = this.intervalMs): void {
    if (this.timer || this.running || this.stopping.signal.aborted) return;
    this.schedule(firstInMs);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Runs now, or again as soon as the run in progress ends. */
  kick(): void {
    if (this.stopping.signal.aborted) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.run()
        .then(() => undefined)
        .catch((err: unknown) => this.onError(err))
        .finally(() => {
          this.running = undefined;
          if (this.stopping.signal.aborted) return;
          const again = this.again;
          this.again = false;
          this.schedule(again ? 0 : this.intervalMs);
        });
    }, ms);
    this.timer.unref();
  }
}
