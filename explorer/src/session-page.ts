import { html, svg, type TemplateResult } from "lit";
import { act, get, seg } from "./api.js";
import { SEGMENT_LABELS, segmentOf, segments, type AssembledContext, type ContextItem } from "./context-bar.js";
import { num, when } from "./format.js";
import type { SessionInfo } from "./sessions-page.js";

// A session: its context window as one bar (an Assemble for the budget and prompt the viewer sets,
// never compacting: the answer of `contextctl context`), the assembled messages, the compaction
// timeline, the transcript paged, and the subagent tree.

interface Entry {
  id: string;
  seq: string;
  timestampMs?: string;
  message?: {
    role?: string;
    content?: Array<{ text?: { text: string }; toolCall?: { id: string; name: string; argumentsJson?: string } }>;
    toolCallId?: string;
    toolName?: string;
  };
  compaction?: { summary: string; firstKeptEntryId: string; tokensBefore: number; tokensAfter: number; engineId: string; details?: Record<string, unknown> };
  custom?: { customType: string };
  runtime?: { type: string };
  hidden?: boolean;
}

const PAGE = 50;
/** The compaction timeline reads at most this many transcript pages (of 500 entries). */
const TIMELINE_PAGES = 20;

export class SessionPage {
  info: SessionInfo | undefined;
  ctx: AssembledContext | undefined;
  budget = 32000;
  prompt = "";
  error = "";
  transcript: Entry[] = [];
  /** Page tokens of the pages before the current one, and the next page's. */
  pageStack: string[] = [];
  pageToken = "";
  nextToken = "";
  compactions: Entry[] = [];
  timelineComplete = true;
  opened: { id: string; entries: Entry[] } | undefined;
  family: SessionInfo[] = [];
  actionNote = "";

  constructor(
    readonly id: string,
    private readonly update: () => void,
    private readonly confirm: (question: string) => Promise<boolean>,
  ) {}

  private fail(err: unknown): void {
    this.error = (err as Error).message;
    this.update();
  }

  async load(): Promise<void> {
    try {
      this.info = (await get<{ info: SessionInfo }>(`sessions/${seg(this.id)}`)).info;
      this.update();
      await Promise.all([this.preview(), this.page(""), this.timeline(), this.tree()]);
    } catch (err) {
      this.fail(err);
    }
  }

  async preview(): Promise<void> {
    try {
      this.ctx = await get<AssembledContext>(`sessions/${seg(this.id)}/context`, { budget: this.budget, prompt: this.prompt || undefined });
      this.error = "";
    } catch (err) {
      this.ctx = undefined;
      this.error = (err as Error).message;
    }
    this.update();
  }

  async page(token: string): Promise<void> {
    const res = await get<{ entries?: Entry[]; nextPageToken?: string }>(`sessions/${seg(this.id)}/transcript`, { pageSize: PAGE, pageToken: token });
    this.transcript = res.entries ?? [];
    this.pageToken = token;
    this.nextToken = res.nextPageToken ?? "";
    this.update();
  }

  private async timeline(): Promise<void> {
    const found: Entry[] = [];
    let token = "";
    let pages = 0;
    do {
      const res = await get<{ entries?: Entry[]; nextPageToken?: string }>(`sessions/${seg(this.id)}/transcript`, { pageSize: 500, pageToken: token });
      found.push(...(res.entries ?? []).filter((e) => e.compaction));
      token = res.nextPageToken ?? "";
    } while (token && ++pages < TIMELINE_PAGES);
    this.compactions = found;
    this.timelineComplete = !token;
    this.update();
  }

  private async tree(): Promise<void> {
    // The sessions related by parent_session_id, among those this token may list.
    const all: SessionInfo[] = [];
    let token = "";
    let pages = 0;
    do {
      const res = await get<{ sessions?: SessionInfo[]; nextPageToken?: string }>("sessions", { pageSize: 500, pageToken: token });
      all.push(...(res.sessions ?? []));
      token = res.nextPageToken ?? "";
    } while (token && ++pages < 20);
    this.family = all;
    this.update();
  }

  private async open(entryId: string): Promise<void> {
    if (this.opened?.id === entryId) {
      this.opened = undefined;
      return this.update();
    }
    try {
      const res = await get<{ entries?: Entry[] }>(`sessions/${seg(this.id)}/compactions/${seg(entryId)}`, { pageSize: 200 });
      this.opened = { id: entryId, entries: res.entries ?? [] };
    } catch (err) {
      this.fail(err);
    }
    this.update();
  }

  private async compact(): Promise<void> {
    if (!(await this.confirm(`Compact session ${this.id} to a budget of ${this.budget} tokens? This commits a compaction entry.`))) return;
    try {
      const res = await act<{ compacted?: boolean; reason?: string; engineId?: string }>(`sessions/${seg(this.id)}/compact`, { budget: this.budget });
      this.actionNote = res.compacted ? `compacted by ${res.engineId ?? ""}` : `not compacted: ${res.reason ?? ""}`;
      await this.load();
    } catch (err) {
      this.actionNote = `refused: ${(err as Error).message}`;
      this.update();
    }
  }

  render(): TemplateResult {
    const i = this.info;
    return html`
      <h1>Session <span class="id">${this.id}</span></h1>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : ""}
      ${
        i
          ? html`<dl class="facts">
              <dt>agent</dt>
              <dd>${i.session.agentId}</dd>
              <dt>key</dt>
              <dd>${i.session.sessionKey || "-"}</dd>
              <dt>engine</dt>
              <dd>${i.selectedEngineId ?? "-"}</dd>
              <dt>entries</dt>
              <dd>${num(i.entryCount)}</dd>
              <dt>active tokens</dt>
              <dd>${num(i.activeTokens)}</dd>
              <dt>updated</dt>
              <dd>${when(i.updatedAtMs)}</dd>
            </dl>`
          : ""
      }
      ${this.renderContext()} ${this.renderTimeline()} ${this.renderTranscript()} ${this.renderTree()}
    `;
  }

  private renderContext(): TemplateResult {
    const ctx = this.ctx;
    return html`<section aria-labelledby="ctx-h">
      <h2 id="ctx-h">Context window</h2>
      <form
        class="preview"
        @submit=${(e: Event) => {
          e.preventDefault();
          void this.preview();
        }}
      >
        <label
          >Budget (tokens)
          <input
            name="budget"
            type="number"
            min="1"
            .value=${String(this.budget)}
            @input=${(e: Event) => (this.budget = Number((e.target as HTMLInputElement).value))}
        /></label>
        <label
          >Prompt
          <input
            name="prompt"
            .value=${this.prompt}
            @input=${(e: Event) => (this.prompt = (e.target as HTMLInputElement).value)}
            placeholder="the latest user message"
        /></label>
        <button type="submit">Preview</button>
        <button type="button" class="danger" @click=${() => void this.compact()}>Compact…</button>
      </form>
      ${this.actionNote ? html`<p class="note" role="status">${this.actionNote}</p>` : ""} ${ctx ? this.renderBar(ctx) : html`<p class="muted">loading…</p>`}
      ${ctx ? this.renderMessages(ctx) : ""}
    </section>`;
  }

  private renderBar(ctx: AssembledContext): TemplateResult {
    const segs = segments(ctx);
    const whole = Math.max(ctx.budget, ctx.sections.totalTokens, 1);
    let x = 0;
    const rects = segs.map((s) => {
      const w = (s.tokens / whole) * 1000;
      const r = svg`<rect class="seg-${s.kind}" x=${x} y="0" width=${w} height="40"><title>${SEGMENT_LABELS[s.kind]}: ${num(s.tokens)} tokens</title></rect>`;
      x += w;
      return r;
    });
    return html`
      <p>
        engine <b>${ctx.engineId}</b>, mode ${ctx.mode}${ctx.fallbackReason ? html`, fell back: <span class="reason">${ctx.fallbackReason}</span>` : ""};
        ${num(ctx.sections.totalTokens)} of ${num(ctx.budget)} tokens
      </p>
      <svg class="bar" viewBox="0 0 1000 40" preserveAspectRatio="none" role="img" aria-label="context bar">${rects}</svg>
      <ul class="legend" data-total=${ctx.sections.totalTokens}>
        ${segs.map((s) => html`<li data-segment=${s.kind} data-tokens=${s.tokens}><span class="swatch seg-${s.kind}"></span>${SEGMENT_LABELS[s.kind]}: ${num(s.tokens)}</li>`)}
      </ul>
      ${
        ctx.systemPromptAddition.text
          ? html`<details>
              <summary>System prompt addition</summary>
              <pre>${ctx.systemPromptAddition.text}</pre>
            </details>`
          : ""
      }
    `;
  }

  private renderMessages(ctx: AssembledContext): TemplateResult {
    // Tool calls paired with their results: a call's result is the later message whose tool_call_id is its id.
    const resultOf = new Map<string, ContextItem>();
    const callOf = new Map<string, ContextItem>();
    for (const m of ctx.messages) {
      if (m.message.toolCallId) resultOf.set(m.message.toolCallId, m);
      for (const b of m.message.content ?? []) if (b.toolCall) callOf.set(b.toolCall.id, m);
    }
    return html`<table class="messages">
      <caption>
        ${ctx.messages.length} messages assembled
      </caption>
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">role</th>
          <th scope="col">part</th>
          <th scope="col">tokens</th>
          <th scope="col">message</th>
        </tr>
      </thead>
      <tbody>
        ${ctx.messages.map((m) => {
          const calls = (m.message.content ?? []).flatMap((b) => (b.toolCall ? [b.toolCall] : []));
          const call = m.message.toolCallId ? callOf.get(m.message.toolCallId) : undefined;
          return html`<tr class="msg" data-segment=${segmentOf(m)}>
            <td class="n">${m.index}</td>
            <td>${m.role}</td>
            <td>${SEGMENT_LABELS[segmentOf(m)]}</td>
            <td class="n">${num(m.tokens)}</td>
            <td>
              <pre class="text">${m.text}</pre>
              ${calls.map((c) => {
                const r = resultOf.get(c.id);
                return html`<div class="pair">
                  tool call <code>${c.name}</code> (${c.id}) → ${r ? html`result in #${r.index}` : "no result in this context"}
                </div>`;
              })}
              ${
                m.message.toolCallId
                  ? html`<div class="pair">
                      result of <code>${m.message.toolName ?? ""}</code> (${m.message.toolCallId}) ←
                      ${call ? html`call in #${call.index}` : "call not in this context"}
                    </div>`
                  : ""
              }
            </td>
          </tr>`;
        })}
      </tbody>
    </table>`;
  }

  private renderTimeline(): TemplateResult {
    const cs = this.compactions;
    const max = Math.max(1, ...cs.map((c) => c.compaction?.tokensBefore ?? 0));
    const step = cs.length > 0 ? 1000 / cs.length : 0;
    const bars = cs.map((c, n) => {
      const b = ((c.compaction?.tokensBefore ?? 0) / max) * 100;
      const a = ((c.compaction?.tokensAfter ?? 0) / max) * 100;
      return svg`<rect class="before" x=${n * step + step * 0.1} y=${100 - b} width=${step * 0.4} height=${b}></rect><rect class="after" x=${n * step + step * 0.5} y=${100 - a} width=${step * 0.4} height=${a}></rect>`;
    });
    return html`<section aria-labelledby="tl-h">
      <h2 id="tl-h">Compactions</h2>
      ${
        cs.length === 0
          ? html`<p class="muted">none${this.timelineComplete ? "" : " in the entries read"}</p>`
          : html`<svg class="timeline" viewBox="0 0 1000 100" preserveAspectRatio="none" role="img" aria-label="tokens before and after each compaction">
                ${bars}
              </svg>
              ${this.timelineComplete ? "" : html`<p class="muted">the first ${TIMELINE_PAGES * 500} entries were read</p>`}
              <ol class="compactions">
                ${cs.map((c) => {
                  const d = (c.compaction?.details ?? {}) as Record<string, unknown>;
                  const summarizer = d.summarizer ?? d.summarizer_kind ?? "";
                  const fallback = d.fallback ?? d.fallback_reason ?? "";
                  return html`<li>
                    <button type="button" aria-expanded=${this.opened?.id === c.id ? "true" : "false"} @click=${() => void this.open(c.id)}>
                      ${when(c.timestampMs)}: ${num(c.compaction?.tokensBefore)} → ${num(c.compaction?.tokensAfter)} tokens by ${c.compaction?.engineId ?? ""}
                      ${summarizer ? html`(summarizer ${String(summarizer)})` : ""}
                      ${fallback ? html`<span class="reason">fallback: ${String(fallback)}</span>` : ""}
                    </button>
                    ${
                      this.opened?.id === c.id
                        ? html`<div class="opened">
                            <h3>Summary</h3>
                            <pre>${c.compaction?.summary ?? ""}</pre>
                            <h3>What it covers (${this.opened.entries.length} entries)</h3>
                            <ol>
                              ${this.opened.entries.map((e) => html`<li>${entryLine(e)}</li>`)}
                            </ol>
                          </div>`
                        : ""
                    }
                  </li>`;
                })}
              </ol>`
      }
    </section>`;
  }

  private renderTranscript(): TemplateResult {
    return html`<section aria-labelledby="tr-h">
      <h2 id="tr-h">Transcript</h2>
      <ol class="transcript">
        ${this.transcript.map((e) => html`<li value=${e.seq}>${entryLine(e)}</li>`)}
      </ol>
      <nav aria-label="transcript pages">
        <button
          ?disabled=${this.pageStack.length === 0}
          @click=${() => {
            const prev = this.pageStack.pop() ?? "";
            void this.page(prev);
          }}
        >
          Previous page
        </button>
        <button
          ?disabled=${!this.nextToken}
          @click=${() => {
            this.pageStack.push(this.pageToken);
            void this.page(this.nextToken);
          }}
        >
          Next page
        </button>
      </nav>
    </section>`;
  }

  private renderTree(): TemplateResult {
    const byParent = new Map<string, SessionInfo[]>();
    for (const s of this.family) if (s.parentSessionId) byParent.set(s.parentSessionId, [...(byParent.get(s.parentSessionId) ?? []), s]);
    // The root: follow parents up from this session (within what was listed).
    const byId = new Map(this.family.map((s) => [s.session.sessionId, s]));
    let root = this.id;
    const seen = new Set<string>();
    while (byId.get(root)?.parentSessionId && !seen.has(root)) {
      seen.add(root);
      root = byId.get(root)?.parentSessionId ?? root;
    }
    const node = (id: string, depth: number): TemplateResult =>
      html`<li>
        ${id === this.id ? html`<b aria-current="page">${id}</b>` : html`<a href="#/session/${seg(id)}">${id}</a>`}
        ${
          depth < 32 && byParent.has(id)
            ? html`<ul>
                ${(byParent.get(id) ?? []).map((c) => node(c.session.sessionId, depth + 1))}
              </ul>`
            : ""
        }
      </li>`;
    return html`<section aria-labelledby="tree-h">
      <h2 id="tree-h">Subagents</h2>
      ${
        root === this.id && !byParent.has(this.id)
          ? html`<p class="muted">no parent, no subagents</p>`
          : html`<ul class="tree">
              ${node(root, 0)}
            </ul>`
      }
    </section>`;
  }
}

function entryLine(e: Entry): TemplateResult {
  if (e.compaction) return html`<span class="kind">compaction</span> ${num(e.compaction.tokensBefore)} → ${num(e.compaction.tokensAfter)} tokens`;
  if (e.message) {
    const m = e.message;
    const text = (m.content ?? []).map((b) => b.text?.text ?? (b.toolCall ? `[tool call ${b.toolCall.name} ${b.toolCall.id}]` : "")).join(" ");
    return html`<span class="kind">${(m.role ?? "").replace("ROLE_", "").toLowerCase()}</span>${e.hidden ? html` <span class="muted">(hidden)</span>` : ""}
      <span class="muted">${e.id}</span>
      <pre class="text">${text}</pre>`;
  }
  if (e.custom) return html`<span class="kind">custom</span> ${e.custom.customType}`;
  return html`<span class="kind">runtime</span> ${e.runtime?.type ?? ""}`;
}
