import { html, render, type TemplateResult } from "lit";
import { setToken, token, whoami, type Info } from "./api.js";
import { EnginesPage } from "./engines-page.js";
import { SessionPage } from "./session-page.js";
import { SessionsPage } from "./sessions-page.js";

// The shell: a token form (kept in this tab only), the navigation, and one page per concern chosen
// by the location's hash (#/sessions, #/session/ID, #/engines). The page holds no state of its
// own beyond what it last read from contextd.

type Page = SessionsPage | SessionPage | EnginesPage;

const app = document.getElementById("app") as HTMLElement;
let page: Page | undefined;
let info: Info | undefined;
let infoError = "";
let dialog: { question: string; reason: boolean; resolve: (answer: string | false) => void } | undefined;

function ask(question: string, reason = false): Promise<string | false> {
  return new Promise((resolve) => {
    dialog = { question, reason, resolve };
    update();
    queueMicrotask(() => {
      const d = document.querySelector<HTMLDialogElement>("dialog.confirm");
      if (d && !d.open) d.showModal();
    });
  });
}

function answer(value: string | false): void {
  const d = dialog;
  dialog = undefined;
  document.querySelector<HTMLDialogElement>("dialog.confirm")?.close();
  update();
  d?.resolve(value);
}

async function route(): Promise<void> {
  if (page instanceof EnginesPage) page.stop();
  try {
    info = await whoami();
    infoError = "";
  } catch (err) {
    info = undefined;
    infoError = (err as Error).message;
  }
  const hash = location.hash.replace(/^#/, "") || "/sessions";
  const [, kind, ...rest] = hash.split("/");
  if (kind === "session" && rest.length > 0) page = new SessionPage(decodeURIComponent(rest.join("/")), update, async (q) => (await ask(q)) !== false);
  else if (kind === "engines") page = new EnginesPage(update, ask);
  else page = new SessionsPage(update);
  update();
  await page.load();
}

function tokenForm(): TemplateResult {
  return html`<form
    class="token"
    @submit=${(e: Event) => {
      e.preventDefault();
      const input = (e.target as HTMLFormElement).elements.namedItem("token") as HTMLInputElement;
      setToken(input.value.trim());
      input.value = "";
      void route();
    }}
  >
    <label>Token <input name="token" type="password" autocomplete="off" placeholder=${token() ? "(set)" : "runtime or operator token"} /></label>
    <button type="submit">Use</button>
    ${
      token()
        ? html`<button
            type="button"
            @click=${() => {
              setToken("");
              void route();
            }}
          >
            Forget
          </button>`
        : ""
    }
  </form>`;
}

function update(): void {
  const hash = location.hash || "#/sessions";
  render(
    html`<header>
        <a class="brand" href="#/sessions">contextd explorer</a>
        <nav aria-label="pages">
          <a href="#/sessions" aria-current=${hash.startsWith("#/session") ? "page" : "false"}>Sessions</a>
          <a href="#/engines" aria-current=${hash.startsWith("#/engines") ? "page" : "false"}>Engines</a>
        </nav>
        <span class="who">${info ? (info.authRequired ? (info.operator ? "operator" : "runtime token") : "auth off") : ""}</span>
        ${tokenForm()}
      </header>
      <main>${infoError ? html`<p class="error" role="alert">${infoError}</p>` : ""} ${page?.render() ?? ""}</main>
      <dialog class="confirm" aria-labelledby="confirm-q" @cancel=${() => answer(false)}>
        <form
          method="dialog"
          @submit=${(e: Event) => {
            e.preventDefault();
            const r = (e.target as HTMLFormElement).elements.namedItem("reason") as HTMLInputElement | null;
            answer(r?.value ?? "");
          }}
        >
          <p id="confirm-q">${dialog?.question ?? ""}</p>
          ${dialog?.reason ? html`<label>Reason <input name="reason" required /></label>` : ""}
          <button type="submit" class="danger">Confirm</button>
          <button type="button" @click=${() => answer(false)}>Cancel</button>
        </form>
      </dialog>`,
    app,
  );
}

window.addEventListener("hashchange", () => void route());
void route();
