# Look-alike of haproxy:2.6 (test/compose/prepare.sh): Debian bookworm's HAProxy, which is 2.6, with the
# official image's layout — the config at /usr/local/etc/haproxy/haproxy.cfg, the `haproxy` user, the
# working directory /var/lib/haproxy and SIGUSR1 (soft stop) to stop.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy /usr/local/sbin \
 && ln -s /usr/sbin/haproxy /usr/local/sbin/haproxy \
 && haproxy -v | grep -q 'version 2\.6\.'
WORKDIR /var/lib/haproxy
STOPSIGNAL SIGUSR1
USER haproxy
CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
