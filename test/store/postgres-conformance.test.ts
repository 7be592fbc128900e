import { postgresFactory } from "./conformance/harness.js";
import { describeStoreConformance } from "./conformance/suite.js";

// The shared store suite on PostgreSQL: every test on a scratch database it creates and drops on the
// local server (127.0.0.1:5432). An unreachable server fails every test; none is skipped.
describeStoreConformance("PostgresStore", postgresFactory);
