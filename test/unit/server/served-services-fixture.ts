/**
 * contextd's served services (src/server/served-services.ts) as the server builds them, on stand-in
 * dependencies that no test here calls: their tables and the served RPCs by path, for the tests of
 * what reads them (the tables against the protos, the admission steps).
 */
import { servedRpcs, servedServices, type ServedServiceDeps } from "../../../src/server/served-services.js";

/** A dependency that fails whatever is done with it: building the tables only holds on to them. */
const never: unknown = new Proxy(() => undefined, {
  get: () => never,
  apply: () => {
    throw new Error("not called by this test");
  },
});

export const SERVED = servedServices(new Proxy({}, { get: () => never }) as ServedServiceDeps);
export const RPCS = servedRpcs(SERVED);
