import { html, type TemplateResult } from "lit";
import { act, get, seg, streamEvents } from "./api.js";
import { enumName, num } from "./format.js";

// Engines: the registry live — ListEngines, then WatchEngines as server-sent events (every event
// carries the engine's whole status) — and the operator actions behind a confirmation.

interface Quarantine {
  operation?: string;
  reason?: string;
  releaseAtMs?: string;
  ejections?: number;
  manual?: boolean;
}

interface Engine {
  engineId: string;
  owner?: string;
  endpoint?: string;
  health?: string;
  quarantine?: Quarantine;
  calls?: string;
  failures?: string;
  fallbacks?: string;
  timeouts?: string;
  builtin?: boolean;
  fallbacksByReason?: Record<string, string>;
}

/** Per engine and operation, from contextd's metrics since it started. */
type Latency = Record<string, Record<string, { calls: number; p50Ms: number; p99Ms: number }>>;

interface EngineEvent {
  type: string;
  engine?: Engine;
  atMs?: string;
  message?: string;
}

export class EnginesPage {
  engines = new Map<string, Engine>();
  latency: Latency = {};
  log: EngineEvent[] = [];
  error = "";
  live = false;
  note = "";
  private abort = new AbortController();
  private ticker: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly update: () => void,
    private readonly confirm: (question: string, reason?: boolean) => Promise<string | false>,
  ) {}

  async load(): Promise<void> {
    try {
      const res = await get<{ engines: Engine[]; latency: Latency }>("engines");
      for (const e of res.engines) this.engines.set(e.engineId, e);
      this.latency = res.latency;
      this.error = "";
    } catch (err) {
      this.error = (err as Error).message;
    }
    this.update();
    // The ejection countdown, and the counters (they change without an event).
    this.ticker = setInterval(() => void this.refresh(), 1000);
    void this.watch();
  }

  private refreshes = 0;
  private async refresh(): Promise<void> {
    if (++this.refreshes % 5 === 0) {
      const res = await get<{ engines: Engine[]; latency: Latency }>("engines").catch(() => undefined);
      if (res) {
        this.engines = new Map(res.engines.map((e) => [e.engineId, e]));
        this.latency = res.latency;
      }
    }
    this.update();
  }

  private async watch(): Promise<void> {
    while (!this.abort.signal.aborted) {
      try {
        this.live = true;
        this.update();
        const end = await streamEvents("engines/events", this.abort.signal, (data) => {
          const ev = data as EngineEvent;
          if (ev.engine) {
            if (ev.type === "ENGINE_EVENT_TYPE_DEREGISTERED") this.engines.delete(ev.engine.engineId);
            else this.engines.set(ev.engine.engineId, ev.engine);
          }
          this.log = [ev, ...this.log].slice(0, 50);
          this.update();
        });
        if (end.code !== "OK" && end.code !== "CLOSED") this.error = `${end.code}: ${end.message}`;
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.error = (err as Error).message;
      }
      this.live = false;
      this.update();
      // Reconnect after a pause (contextd restarting, a proxy's idle timeout).
      await new Promise((r) => setTimeout(r, 2000));
    }
  }

  stop(): void {
    this.abort.abort();
    if (this.ticker) clearInterval(this.ticker);
  }

  private async action(e: Engine, kind: "isolate" | "release" | "deregister"): Promise<void> {
    const question = {
      isolate: `Isolate engine ${e.engineId}? Its sessions go to legacy until released.`,
      release: `Release engine ${e.engineId} from quarantine?`,
      deregister: `Deregister engine ${e.engineId}?`,
    }[kind];
    const answer = await this.confirm(question, kind === "isolate");
    if (answer === false) return;
    try {
      await act(`engines/${seg(e.engineId)}/${kind}`, kind === "isolate" ? { reason: answer } : {});
      this.note = `${kind}: ${e.engineId} done`;
      this.error = "";
    } catch (err) {
      this.note = "";
      this.error = `${kind} refused: ${(err as Error).message}`;
    }
    this.update();
  }

  render(): TemplateResult {
    const now = Date.now();
    const list = [...this.engines.values()].sort((a, b) => a.engineId.localeCompare(b.engineId));
    return html`
      <h1>Engines <span class="live ${this.live ? "on" : "off"}" role="status">${this.live ? "live" : "reconnecting"}</span></h1>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : ""} ${this.note ? html`<p class="note" role="status">${this.note}</p>` : ""}
      <table class="engines">
        <thead>
          <tr>
            <th scope="col">engine</th>
            <th scope="col">owner</th>
            <th scope="col">endpoint</th>
            <th scope="col">health</th>
            <th scope="col">state</th>
            <th scope="col">calls</th>
            <th scope="col">failures</th>
            <th scope="col">fallbacks</th>
            <th scope="col">timeouts</th>
            <th scope="col">assemble p50 / p99</th>
            <th scope="col">actions</th>
          </tr>
        </thead>
        <tbody>
          ${list.map((e) => {
            const q = e.quarantine;
            const left = q?.releaseAtMs ? Math.max(0, Math.ceil((Number(q.releaseAtMs) - now) / 1000)) : 0;
            return html`<tr data-engine=${e.engineId} data-state=${q ? "quarantined" : "active"}>
              <th scope="row">${e.engineId}</th>
              <td>${e.owner ?? ""}</td>
              <td>${e.builtin ? "(in process)" : (e.endpoint ?? "")}</td>
              <td>${enumName(e.health, "ENGINE_HEALTH_")}</td>
              <td class="state">
                ${
                  q
                    ? html`<span class="bad">quarantined</span>
                        ${q.manual ? "(manual)" : left > 0 ? html`(ejected for ${left}s more)` : "(until a health check passes)"}:
                        <span class="reason">${q.operation ?? ""}: ${q.reason ?? ""}</span>`
                    : html`<span class="good">active</span>`
                }
              </td>
              <td class="n">${num(e.calls)}</td>
              <td class="n">${num(e.failures)}</td>
              <td class="n">${num(e.fallbacks)}</td>
              <td class="n">${num(e.timeouts)}</td>
              <td class="n">${latencyText(this.latency[e.engineId]?.assemble)}</td>
              <td>
                ${
                  e.builtin
                    ? ""
                    : html`<button type="button" @click=${() => void this.action(e, "isolate")}>Isolate…</button>
                        <button type="button" ?disabled=${!q} @click=${() => void this.action(e, "release")}>Release…</button>
                        <button type="button" class="danger" @click=${() => void this.action(e, "deregister")}>Deregister…</button>`
                }
              </td>
            </tr>`;
          })}
        </tbody>
      </table>
      <h2>Events</h2>
      <ol class="events">
        ${this.log.map(
          (ev) =>
            html`<li>
              ${new Date(Number(ev.atMs ?? 0)).toISOString()} ${enumName(ev.type, "ENGINE_EVENT_TYPE_")} <b>${ev.engine?.engineId ?? ""}</b>
              <span class="reason">${ev.message ?? ""}</span>
            </li>`,
        )}
      </ol>
    `;
  }
}

function latencyText(l: { p50Ms: number; p99Ms: number } | undefined): string {
  if (!l) return "-";
  const ms = (v: number) => (v < 10 ? v.toFixed(1) : Math.round(v).toString());
  return `${ms(l.p50Ms)} / ${ms(l.p99Ms)} ms`;
}
