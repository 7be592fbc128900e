/**
 * Misbehaving context engines as REAL separate processes, for registry / quarantine / fallback
 * integration tests. Two implementations with the same CLI, control file and stdout protocol:
 *
 * - Python (test/engines/python/misbehaving_engine.py), run with Debian's /usr/bin/python3 and
 *   python3-grpcio, with clients/python on PYTHONPATH: the `contextd` package's committed stubs
 *   (contextd.v1, contextd.health.v1).
 * - TypeScript (test/engines/ts/misbehaving-engine.ts), built on the engine SDK's `serveEngine`;
 *   compiled on demand with the project's TypeScript (together with the SDK sources it imports)
 *   into node_modules/.cache/contextd-test-engines/<hash of the sources>, then run with node.
 *
 *   const engine = await startPythonEngine({ engineId: "flaky", registry: cd.address, owner: "acme", ownerToken: "s3cret" });
 *   expect(await engine.registered).toMatchObject({ ok: true });
 *   engine.control({ assemble: "hang" });           // read by the engine on its next call
 *   ...                                             // SessionService.Assemble falls back to legacy
 *   await engine.waitForEvent((e) => e.event === "cancelled" && e.op === "assemble");
 *   await engine.stop();
 *
 *
 * Where things are (this module re-exports what the tests use):
 * - engine-modes.ts: the control file, the modes and what each RPC does (EngineControl, EngineMode, ...).
 * - engine-launch.ts: starting an engine, its stdout events, registration, stop (EngineProcess).
 * - python-engine.ts: the Python engine's prerequisites (grpc, the `contextd` package).
 * - ts-engine-build.ts: compiling the TS engine on demand, and the build cache.
 * - leaked-host-context.ts: reading the file `leak_host_token_to` makes the engine write.
 */
export type { EngineCapability, EngineControl, EngineMode, EngineOp, HealthMode } from "./engine-modes.js";
export type { EngineEvent, EngineProcess, RegistrationOutcome, StartEngineOptions } from "./engine-launch.js";
export { startEngine, startPythonEngine, startTsEngine } from "./engine-launch.js";
export { ensurePythonEngineStubs, PYTHON_ENGINE, pythonEnginesAvailable } from "./python-engine.js";
export { compileTsEngine, TS_ENGINE } from "./ts-engine-build.js";
export { type LeakedHostContext, readLeakedHostContext } from "./leaked-host-context.js";
export { PYTHON } from "./python.js";
