import { html, type TemplateResult } from "lit";
import { get, seg } from "./api.js";
import { num, when } from "./format.js";

// Sessions: ListSessions, filtered here by agent, engine, activity and size (the API has no filter;
// the filters narrow the pages loaded), and a search across history (SearchTranscript, one call per
// agent of the loaded sessions, scope AGENT).

export interface SessionInfo {
  session: { sessionId: string; agentId: string; sessionKey: string };
  createdAtMs?: string;
  updatedAtMs?: string;
  entryCount?: number;
  messageCount?: number;
  compactionCount?: number;
  totalTokens?: string;
  activeTokens?: number;
  selectedEngineId?: string;
  parentSessionId?: string;
}

interface SearchHit {
  entryId: string;
  sessionId: string;
  seq: string;
  role: string;
  compaction: boolean;
  timestampMs: string;
  snippet: string;
}

const ACTIVITY: Record<string, number> = { any: 0, "1h": 3_600_000, "24h": 86_400_000, "7d": 604_800_000 };

export class SessionsPage {
  sessions: SessionInfo[] = [];
  next = "";
  error = "";
  filter = { agent: "", engine: "", activity: "any", minTokens: 0 };
  query = "";
  hits: SearchHit[] | undefined;
  loading = false;

  constructor(private readonly update: () => void) {}

  async load(more = false): Promise<void> {
    this.loading = true;
    try {
      const res = await get<{ sessions?: SessionInfo[]; nextPageToken?: string }>("sessions", { pageSize: 200, pageToken: more ? this.next : "" });
      this.sessions = more ? [...this.sessions, ...(res.sessions ?? [])] : (res.sessions ?? []);
      this.next = res.nextPageToken ?? "";
      this.error = "";
    } catch (err) {
      this.error = (err as Error).message;
    }
    this.loading = false;
    this.update();
  }

  private visible(): SessionInfo[] {
    const f = this.filter;
    const since = ACTIVITY[f.activity] ? Date.now() - ACTIVITY[f.activity] : 0;
    return this.sessions.filter(
      (s) =>
        (!f.agent || s.session.agentId.includes(f.agent) || s.session.sessionId.includes(f.agent)) &&
        (!f.engine || s.selectedEngineId === f.engine) &&
        Number(s.updatedAtMs ?? 0) >= since &&
        (s.activeTokens ?? 0) >= f.minTokens,
    );
  }

  private async search(): Promise<void> {
    const q = this.query.trim();
    if (!q) {
      this.hits = undefined;
      return this.update();
    }
    // One anchor session per agent: scope AGENT searches every session of that agent.
    const anchors = new Map<string, string>();
    for (const s of this.sessions) if (!anchors.has(s.session.agentId)) anchors.set(s.session.agentId, s.session.sessionId);
    try {
      const pages = await Promise.all(
        [...anchors.values()].map((id) => get<{ hits?: SearchHit[] }>(`sessions/${seg(id)}/search`, { q, scope: "agent", pageSize: 20 })),
      );
      this.hits = pages.flatMap((p) => p.hits ?? []);
      this.error = "";
    } catch (err) {
      this.error = (err as Error).message;
    }
    this.update();
  }

  render(): TemplateResult {
    const engines = [...new Set(this.sessions.map((s) => s.selectedEngineId ?? "").filter(Boolean))].sort();
    const rows = this.visible();
    const set = (k: keyof SessionsPage["filter"]) => (e: Event) => {
      const v = (e.target as HTMLInputElement).value;
      (this.filter as Record<string, unknown>)[k] = k === "minTokens" ? Number(v) || 0 : v;
      this.update();
    };
    return html`
      <h1>Sessions</h1>
      <form class="filters" @submit=${(e: Event) => e.preventDefault()}>
        <label>Agent or id <input name="agent" .value=${this.filter.agent} @input=${set("agent")} /></label>
        <label
          >Engine
          <select name="engine" @change=${set("engine")}>
            <option value="">any</option>
            ${engines.map((e) => html`<option .value=${e} ?selected=${this.filter.engine === e}>${e}</option>`)}
          </select></label
        >
        <label
          >Active within
          <select name="activity" @change=${set("activity")}>
            ${Object.keys(ACTIVITY).map((a) => html`<option .value=${a} ?selected=${this.filter.activity === a}>${a}</option>`)}
          </select></label
        >
        <label>At least tokens <input name="minTokens" type="number" min="0" .value=${String(this.filter.minTokens)} @input=${set("minTokens")} /></label>
      </form>
      <form
        class="search"
        role="search"
        @submit=${(e: Event) => {
          e.preventDefault();
          void this.search();
        }}
      >
        <label
          >Search history <input name="q" type="search" .value=${this.query} @input=${(e: Event) => (this.query = (e.target as HTMLInputElement).value)}
        /></label>
        <button type="submit">Search</button>
      </form>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : ""}
      ${
        this.hits
          ? html`<section aria-label="search results">
              <h2>${this.hits.length} matches</h2>
              <ul class="hits">
                ${this.hits.map(
                  (h) =>
                    html`<li>
                      <a href="#/session/${seg(h.sessionId)}">${h.sessionId}</a>
                      <span class="muted">#${h.seq} ${h.compaction ? "summary" : h.role} ${when(h.timestampMs)}</span>
                      <div class="snippet">${h.snippet}</div>
                    </li>`,
                )}
              </ul>
            </section>`
          : ""
      }
      <table class="sessions">
        <caption>
          ${rows.length} of ${this.sessions.length} sessions loaded
        </caption>
        <thead>
          <tr>
            <th scope="col">session</th>
            <th scope="col">agent</th>
            <th scope="col">engine</th>
            <th scope="col">messages</th>
            <th scope="col">active tokens</th>
            <th scope="col">compactions</th>
            <th scope="col">updated</th>
          </tr>
        </thead>
        <tbody>
          ${rows.map(
            (s) =>
              html`<tr>
                <td>
                  <a href="#/session/${seg(s.session.sessionId)}">${s.session.sessionId}</a
                  >${s.parentSessionId ? html` <span class="muted">(subagent)</span>` : ""}
                </td>
                <td>${s.session.agentId}</td>
                <td>${s.selectedEngineId ?? ""}</td>
                <td class="n">${num(s.messageCount)}</td>
                <td class="n">${num(s.activeTokens)}</td>
                <td class="n">${num(s.compactionCount)}</td>
                <td>${when(s.updatedAtMs)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
      ${this.next ? html`<button @click=${() => void this.load(true)} ?disabled=${this.loading}>Load more</button>` : ""}
    `;
  }
}
