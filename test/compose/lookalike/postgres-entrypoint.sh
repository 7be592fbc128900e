#!/bin/sh
# What the official postgres image's entrypoint does, in short: as root, own the data directory and
# re-run as `postgres`; on an empty data directory, initdb with POSTGRES_USER as the superuser and
# POSTGRES_PASSWORD as its password, TCP connections from anywhere with scram-sha-256, and create
# POSTGRES_DB (default: the user's name) with a server that listens on no TCP port and a private
# socket (so a health check cannot see it), then exec postgres.
set -eu
if [ "${1:-}" = postgres ] || [ "${1#-}" != "${1:-}" ]; then
  [ "${1:-}" = postgres ] || set -- postgres "$@"
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
  fi
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set (the superuser's password)}"
    user="${POSTGRES_USER:-postgres}"
    db="${POSTGRES_DB:-$user}"
    pw="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
    initdb --username="$user" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA"
    rm -f "$pw"
    printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
      sock="$(mktemp -d)"
      pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=$sock" -w start
      psql -v ON_ERROR_STOP=1 -h "$sock" -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
      pg_ctl -D "$PGDATA" -m fast -w stop
      rmdir "$sock"
    fi
    echo "PostgreSQL init process complete; ready for start up."
  fi
fi
exec "$@"
