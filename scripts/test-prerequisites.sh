#!/usr/bin/env bash
# What the tests need from the machine besides node_modules: Debian packages, installed here when
# missing (idempotent: nothing is installed, and apt is not even asked, when all are present).
# `npm test` runs it first (the pretest script), and so does .ci/run, so the README's two commands
# are all a fresh machine needs. Without root (or apt-get) it stops at once with one line that says
# what to install.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
# The Python engines, the Python client and their stubs (Debian's grpcio 1.51, protoc 3.21 and its plugin).
/usr/bin/python3 -c "import grpc" 2>/dev/null || need+=(python3-grpcio)
have protoc || need+=(protobuf-compiler)
have grpc_python_plugin || need+=(protobuf-compiler-grpc)
# A Go client from the protos alone (test/go-client): Go 1.19, protoc's Go plugins, and grpc-go as
# Debian source packages (no module proxy is reachable), built in GOPATH mode. grpc-go needs
# github.com/golang/protobuf 1.5 (1.3, which apt would otherwise pick, cannot marshal the messages
# protoc-gen-go 1.28 generates); installing 1.5 replaces 1.3.
have go || need+=(golang-go)
have protoc-gen-go || need+=(protoc-gen-go)
have protoc-gen-go-grpc || need+=(protoc-gen-go-grpc)
for pkg in golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev; do
  installed "$pkg" || need+=("$pkg")
done
# The README installs the Python package into a virtualenv (test/readme, test/python-client).
/usr/bin/python3 -c "import ensurepip" 2>/dev/null || need+=(python3-venv)
# `docker-compose config` checks docker-compose.yml (test/integration/docker-compose.test.ts).
have docker-compose || need+=(docker-compose)
# The L7 gRPC load balancer of test/replicas/load-balancer.test.ts (docs/deploy/haproxy.cfg).
have haproxy || need+=(haproxy)
# The test hosts (network namespaces, veth pairs) and the cut link of test/reliability/partition.test.ts.
have ip || need+=(iproute2)
have nft || need+=(nftables)
# The context explorer's browser tests (test/explorer): Debian's Chromium, driven by playwright-core
# (never a browser download).
[ -x /usr/bin/chromium ] || need+=(chromium)

[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! have apt-get; then
  echo "the tests need Debian packages that are missing: run 'apt-get install -y ${need[*]}' as root, then npm test again" >&2
  exit 1
fi
echo "installing the Debian packages the tests need: ${need[*]}" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "installing ${need[*]} with apt-get failed (output above)" >&2
  exit 1
fi
