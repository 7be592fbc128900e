import { EventEmitter } from "node:events";
import { EngineEventType, type EngineEvent } from "../contract/gen/contextd/v1/registry.js";
import { toEngineStatus, type RegisteredEngine } from "./engine-registry.js";

/** Registration, health, quarantine and release events, fanned out to WatchEngines streams. */
export class EngineEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Every WatchEngines stream is a listener; there is no meaningful small limit.
    this.emitter.setMaxListeners(0);
  }

  publish(type: EngineEventType, engine: RegisteredEngine, message: string): void {
    const event: EngineEvent = { type, engine: toEngineStatus(engine), atMs: Date.now(), message };
    this.emitter.emit("event", event);
  }

  subscribe(listener: (event: EngineEvent) => void): () => void {
    this.emitter.on("event", listener);
    return () => this.emitter.off("event", listener);
  }
}

export { EngineEventType };
