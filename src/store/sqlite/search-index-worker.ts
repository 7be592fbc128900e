/**
 * The search indexer's thread (search-index-thread.ts): applies the store's search_log to the index
 * file, a step at a time, whenever the store says it wrote log rows; after each step it reports the
 * last row applied (durable: the index file syncs every commit). Between two steps it reads its
 * messages, so a `stop` waits for one step at most.
 */
import os from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { openIndexFile, SearchIndexer } from "./search-index.js";
import type { FromIndexer, ToIndexer } from "./search-index-thread.js";

const { storePath, indexPath, stepOps } = workerData as { storePath: string; indexPath: string; stepOps: number };
// Beneath the event loop and the counting threads: appends are answered first, the index catches up
// when they leave it CPU (a search waits for it; appends wait only past MAX_INDEX_LAG).
try {
  os.setPriority(10);
} catch {
  // Not allowed here (a container without the capability to lower a thread's own priority? — it
  // never needs one): the indexer runs at the process's priority.
}
const db = openIndexFile(indexPath, storePath);
const indexer = new SearchIndexer(db, "src", "main");
const post = (m: FromIndexer) => parentPort!.postMessage(m);

let wanted = false;
let running = false;
let stopping = false;

function run(): void {
  if (stopping) return finish();
  if (!wanted) {
    running = false;
    return;
  }
  running = true;
  wanted = false;
  try {
    const { applied, more } = indexer.step(stepOps);
    if (more) wanted = true;
    post({ type: "applied", applied });
  } catch (err) {
    post({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  }
  setImmediate(run);
}

function finish(): void {
  if (db.open) db.close();
  post({ type: "stopped" });
  parentPort!.close();
}

parentPort!.on("message", (m: ToIndexer) => {
  if (m.type === "stop") {
    stopping = true;
    if (!running) finish();
    return;
  }
  wanted = true;
  if (!running) {
    running = true;
    setImmediate(run);
  }
});
