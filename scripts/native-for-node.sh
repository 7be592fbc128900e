#!/usr/bin/env bash
# Makes node_modules' native modules load in the `node` on PATH. Only better-sqlite3 needs it: it is
# built against V8's API, so a build for Node 20 does not load in Node 24 and the other way round
# (NODE_MODULE_VERSION); the other native packages are N-API (esbuild, rolldown, …) or per-platform.
#
# A build for each ABI is kept in node_modules/.cache/better-sqlite3, named for the package's version
# and the ABI, so that switching between the machine's Node 20 and CI's Node 24 (scripts/with-node24.sh)
# costs a copy, not a compile (a minute or two on 2 cores), after the first time. `npm ci` deletes the cache
# with node_modules; a kept build is used only when it loads. The file is replaced by a rename, never
# overwritten: a process that has the old one loaded keeps its mapping.
#
# Builds from source against npm_config_nodedir (the headers; with-node24.sh sets it to Node 24's,
# npm's config names the machine's), offline: no prebuilt binary is downloaded.
#
# `native-for-node.sh --keep`: only keep the build in place if it loads in the node on PATH, change
# nothing (with-node24.sh runs it with the machine's node before switching, so that the build `npm ci`
# made is kept rather than compiled again on the way back).
set -euo pipefail
cd "$(dirname "$0")/.."

[ -d node_modules/better-sqlite3 ] || { echo "native-for-node: no node_modules/better-sqlite3: run npm ci first" >&2; exit 1; }
target=node_modules/better-sqlite3/build/Release/better_sqlite3.node
loads() { node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()" >/dev/null 2>&1; }
version="$(node -p "require('better-sqlite3/package.json').version")"
abi="$(node -p process.versions.modules)"
kept="node_modules/.cache/better-sqlite3/$version-abi$abi.node"
keep() { mkdir -p "$(dirname "$kept")" && cp "$target" "$kept.tmp.$$" && mv -f "$kept.tmp.$$" "$kept"; }

if loads; then
  cmp -s "$target" "$kept" 2>/dev/null || keep
  exit 0
fi
[ "${1:-}" != --keep ] || exit 0
if [ -f "$kept" ]; then
  cp "$kept" "$target.tmp.$$" && mv -f "$target.tmp.$$" "$target"
  if loads; then
    echo "better-sqlite3 $version: the kept build for $(node --version) (ABI $abi)" >&2
    exit 0
  fi
fi
echo "better-sqlite3 $version: building for $(node --version) (ABI $abi) against the headers in ${npm_config_nodedir:-the nodedir of npm config}, a minute or two" >&2
npm_config_build_from_source=true npm rebuild better-sqlite3 --loglevel=error >&2
loads || { echo "better-sqlite3 built for $(node --version) does not load" >&2; exit 1; }
keep
