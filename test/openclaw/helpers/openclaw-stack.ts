/**
 * What most OpenClaw tests start with: the pinned OpenClaw installed, the model stand-in, a contextd,
 * a client to it, and an OpenClaw home whose plugin points at that contextd (`plugin: false`: an
 * OpenClaw that does not use contextd yet). Tests keep the parts in variables of their own, since a
 * test may restart contextd (and reconnect) halfway.
 *
 *   ({ install, model, contextd, cx, home } = await startOpenClawStack({ compaction: { keep_recent_tokens: 200 } }));
 *   ...
 *   await stopOpenClawStack({ cx, contextd, model, home });
 */
import { ContextdClient } from "../../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../../helpers/contextd-process.js";
import { startModelServer, type ModelServer } from "./model-server.js";
import { OpenClawHome } from "./openclaw-home.js";
import { ensureOpenClaw, type OpenClawInstall } from "./openclaw-install.js";

export interface OpenClawStack {
  install: OpenClawInstall;
  model: ModelServer;
  contextd: ContextdProcess;
  cx: ContextdClient;
  home: OpenClawHome;
}

export async function startOpenClawStack(contextdConfig: Record<string, unknown> = {}, options: { plugin?: boolean } = {}): Promise<OpenClawStack> {
  const install = await ensureOpenClaw();
  const model = await startModelServer();
  const contextd = await startContextd({ config: contextdConfig });
  const cx = new ContextdClient({ address: contextd.address });
  const home = new OpenClawHome(install, { modelBaseUrl: model.baseUrl, ...(options.plugin === false ? {} : { plugin: { address: contextd.address } }) });
  return { install, model, contextd, cx, home };
}

/** Stops whatever of a stack was started (any part may be missing after a failed start). */
export async function stopOpenClawStack(s: Partial<OpenClawStack>): Promise<void> {
  s.cx?.close();
  await s.contextd?.cleanup();
  await s.model?.close();
  s.home?.cleanup();
}
