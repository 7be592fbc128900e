// `npm run docs:errors`: writes the error reason table (scripts/error-reasons.mjs) between the
// markers of docs/concepts.md, from proto/contextd/v1/errors.proto.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { replaceErrorReasons } from "./error-reasons.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const proto = fs.readFileSync(path.join(root, "proto/contextd/v1/errors.proto"), "utf8");
const file = path.join(root, "docs/concepts.md");
const before = fs.readFileSync(file, "utf8");
const after = replaceErrorReasons(before, proto);
if (after !== before) fs.writeFileSync(file, after);
console.log(after === before ? "docs/concepts.md is up to date" : "docs/concepts.md updated");
