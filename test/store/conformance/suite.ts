import { describe } from "vitest";

import { useStores, type StoreFactory } from "./harness.js";
import { describeKeysAndImports } from "./keys-and-imports.js";
import { describeMessageKeys } from "./message-keys.js";
import { describePinned } from "./pinned.js";
import { describeRegistry } from "./registry.js";
import { describeRewrites } from "./rewrites.js";
import { describeStoreCopy } from "./store-copy.js";
import { describeSubagents } from "./subagents.js";
import { describeSearch } from "./search.js";
import { describeTranscripts } from "./transcript.js";

/**
 * The behaviour every store shares (src/store/types.ts, registry-store.ts and the "behaviour where
 * the interface is silent" of SqliteStore), run against one kind of store. Each test gets a fresh,
 * empty location (harness.ts); tests that open several stores on it are several connections — for
 * PostgreSQL, several pools, as replicas have.
 */
export function describeStoreConformance(name: string, factory: StoreFactory): void {
  describe(`${name} (store conformance)`, () => {
    const stores = useStores(factory);
    describeTranscripts(stores);
    describePinned(stores);
    describeRewrites(stores);
    describeKeysAndImports(stores);
    describeMessageKeys(stores);
    describeRegistry(stores);
    describeStoreCopy(stores);
    describeSubagents(stores);
    describeSearch(stores);
  });
}
