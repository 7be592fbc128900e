import { sqliteFactory } from "../../../store/conformance/harness.js";
import { describeStoreConformance } from "../../../store/conformance/suite.js";

// The shared store suite on SQLite: every test on a fresh file in a temp dir.
describeStoreConformance("SqliteStore", sqliteFactory);
