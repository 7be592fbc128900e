import { sqliteFactory } from "./conformance/harness.js";
import { describeStoreConformance } from "./conformance/suite.js";

// The shared store suite on SQLite: every test on a fresh file in a temp dir.
describeStoreConformance("SqliteStore", sqliteFactory);
