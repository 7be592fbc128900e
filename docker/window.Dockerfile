# The Python sample engine `window` (engines/window), on Debian's Python with Debian's grpcio.
#
#   docker build -f docker/window.Dockerfile -t contextd-window:local .      # context: the repository root
#
# Nothing comes from PyPI: python3-grpcio and python3-protobuf are Debian packages, and the engine
# generates its gRPC stubs when it starts with Debian's protoc + grpc_python_plugin (protobuf-compiler,
# protobuf-compiler-grpc) from proto/ and from grpc.health.v1's health.proto.

# ---- health.proto, exactly the file the TypeScript side uses --------------------------------------------
# The engine reads node_modules/grpc-health-check/proto/health/v1/health.proto (as the tests do). The
# image has no node_modules, so take that one file from the grpc-health-check tarball of the version
# package-lock.json pins, and check the tarball against the lockfile's integrity hash.
FROM node:20-bookworm-slim AS health-proto
WORKDIR /src
COPY package-lock.json ./
RUN set -eu; \
    version="$(node -p "require('./package-lock.json').packages['node_modules/grpc-health-check'].version")"; \
    npm pack --silent --pack-destination /src "grpc-health-check@${version}" >/dev/null; \
    node -e " \
      const fs = require('fs'), crypto = require('crypto'); \
      const want = require('./package-lock.json').packages['node_modules/grpc-health-check'].integrity; \
      const [algo, digest] = want.split('-'); \
      const got = crypto.createHash(algo).update(fs.readFileSync('grpc-health-check-${version}.tgz')).digest('base64'); \
      if (got !== digest) { console.error('grpc-health-check tarball does not match package-lock.json'); process.exit(1); }"; \
    mkdir -p /out; \
    tar -xzf "grpc-health-check-${version}.tgz" -C /out package/proto/health/v1/health.proto

# ---- runtime ------------------------------------------------------------------------------------------
FROM debian:bookworm-slim

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -c "import grpc, google.protobuf" \
 && test -x /usr/bin/protoc && test -x /usr/bin/grpc_python_plugin

# The same layout as the repository, so that the engine finds proto/ and health.proto where it looks.
WORKDIR /app
COPY proto ./proto
COPY --from=health-proto /out/package/proto/health/v1/health.proto ./node_modules/grpc-health-check/proto/health/v1/health.proto

# An unprivileged user. It owns the engine's directory, where the stubs generated at start may be written.
RUN groupadd --system --gid 10001 window \
 && useradd --system --uid 10001 --gid window --home-dir /app --no-create-home --shell /usr/sbin/nologin window
COPY --chown=window:window engines/window ./engines/window

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER window

CMD ["python3", "engines/window/main.py"]
