#!/usr/bin/env node
// The contextctl CLI. Built from src/cli/contextctl.ts by `npm run build` (run by `npm ci`).
import "../dist/src/cli/contextctl.js";
