#!/usr/bin/env node
// The contextd server. Built from src/server/main.ts by `npm run build` (run by `npm ci`).
// grpc-js writes its own diagnostics to stderr; contextd logs through pino, and a failed start must
// be one line, so grpc-js is quiet unless GRPC_VERBOSITY asks otherwise.
process.env.GRPC_VERBOSITY ??= "NONE";
await import("../dist/src/server/main.js");
