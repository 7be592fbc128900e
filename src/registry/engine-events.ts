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
    const event: EngineEvent = { type, engine: toEngineStatus(engine), atMs: Date.now(), message, instanceId: engine.instanceId };
    this.emitter.emit("event", event);
  }

  /** Listens to events until the returned function is called; `onClose` runs when the server shuts down. */
  subscribe(listener: (event: EngineEvent) => void, onClose?: () => void): () => void {
    this.emitter.on("event", listener);
    if (onClose) this.emitter.on("close", onClose);
    return () => {
      this.emitter.off("event", listener);
      if (onClose) this.emitter.off("close", onClose);
    };
  }

  /** Ends every WatchEngines stream (graceful shutdown would otherwise wait for them). */
  closeAll(): void {
    this.emitter.emit("close");
  }
}

export { EngineEventType };
