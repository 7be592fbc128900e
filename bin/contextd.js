#!/usr/bin/env node
// The contextd server. Built from src/server/main.ts by `npm run build` (run by `npm ci`).
import "../dist/src/server/main.js";
