// `npm run docs:config`: writes the configuration reference (scripts/config-reference.mjs) between the
// markers of docs/configuration.md, from the built schema in dist/ (the npm script builds first).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { replaceReference } from "./config-reference.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const modules = await Promise.all(
  ["dist/src/server/config-schema.js", "dist/src/server/duration.js", "dist/src/compaction/summarizer/summarizer-config.js"].map(
    (f) => import(path.join(root, f)),
  ),
);
const file = path.join(root, "docs/configuration.md");
const before = fs.readFileSync(file, "utf8");
const after = replaceReference(before, Object.assign({}, ...modules));
if (after !== before) fs.writeFileSync(file, after);
console.log(after === before ? "docs/configuration.md is up to date" : "docs/configuration.md updated");
