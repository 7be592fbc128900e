# contextd and the TypeScript sample engine `lossless`: one image, two commands.
#
#   docker build -t contextd:local .
#   docker run --rm -p 127.0.0.1:50051:50051 \
#     -e CONTEXTD_ADMIN_TOKEN=... -e CONTEXTD_RUNTIME_TOKEN=... \
#     -e LOSSLESS_OWNER_TOKEN=... -e WINDOW_OWNER_TOKEN=... contextd:local
#   docker run ... contextd:local node dist/engines/lossless/main.js       # the lossless engine
#
# The default config (/etc/contextd/contextd.yaml) is docker/contextd.compose.yaml; docker-compose.yml
# mounts the same file over it, so an edit there needs no rebuild.

# ---- build: compile better-sqlite3 and the TypeScript, then drop the dev dependencies ----------------
FROM node:24-bookworm-slim AS build

# better-sqlite3 is compiled from source (node-gyp): Python, make and a C++ compiler.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Build native code from source against the headers this image ships in /usr/local/include/node: no
# download of node headers or of a prebuilt binary, only the npm registry (and Debian's apt above).
ENV npm_config_nodedir=/usr/local \
    npm_config_build_from_source=true \
    npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false

# Dependencies first, so that a source change does not reinstall them. `--ignore-scripts` because the
# package's `prepare` script (tsc) needs the sources, which are not here yet; the one install script
# the runtime needs is better-sqlite3's, run by `npm rebuild`.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts \
 && npm rebuild better-sqlite3 \
 && node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()"

COPY tsconfig.json ./
COPY bin ./bin
COPY proto ./proto
COPY src ./src
COPY engines ./engines
COPY config ./config
# Compile (needs the dev dependencies: typescript), then remove the dev dependencies for the runtime.
# Only tsc: the rest of `npm run build` bundles the OpenClaw plugin (integrations/openclaw), which is
# not part of the image.
RUN npx tsc -p tsconfig.json \
 && npm prune --omit=dev --ignore-scripts \
 && test -f dist/src/server/main.js

# ---- runtime ------------------------------------------------------------------------------------------
FROM node:24-bookworm-slim

# Two glibc malloc arenas instead of one per thread (contextd runs its main thread, a token-counting
# thread and libuv's pool): ~20-30 MB less resident at thousands of sessions, no throughput cost seen
# (docs/performance.md, "Goals met": memory).
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2
WORKDIR /app

COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/proto ./proto
COPY --from=build /app/config ./config
COPY docker/contextd.compose.yaml /etc/contextd/contextd.yaml

# Data directories, owned by the unprivileged `node` user (uid 1000) of the base image: a new named
# volume mounted on one starts with this ownership. (No VOLUME here: the lossless engine runs from this
# image too and would get an anonymous volume it does not use; docker-compose.yml names the volumes.)
RUN mkdir -p /var/lib/contextd /var/lib/lossless \
 && chown node:node /var/lib/contextd /var/lib/lossless
USER node

# 50051 gRPC (contextd; the lossless engine listens where CONTEXTD_ENGINE_LISTEN says), 9464 metrics.
EXPOSE 50051 9464

CMD ["node", "bin/contextd.js", "--config", "/etc/contextd/contextd.yaml"]
