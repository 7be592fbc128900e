# Stand-in for postgres:16 (test/compose/prepare.sh): Debian bookworm's PostgreSQL — 15, the only major
# version Debian bookworm ships — with the official image's interface: PGDATA=/var/lib/postgresql/data,
# POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB applied on the first start, TCP on every address
# with scram-sha-256, pg_isready and psql on the PATH, SIGINT (fast shutdown) to stop.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/run/postgresql /var/lib/postgresql/data \
 && chown -R postgres:postgres /var/run/postgresql /var/lib/postgresql \
 && chmod 2777 /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
