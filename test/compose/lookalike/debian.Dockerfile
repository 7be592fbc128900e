# Look-alike of debian:bookworm-slim (test/compose/prepare.sh): the debootstrapped, slimmed root file
# system it `docker import`ed, plus this machine's CA bundle, which npm, pip and OpenSSL here trust.
# Never used for anything but the compose test on a machine without an image registry.
ARG ROOTFS
FROM ${ROOTFS}
# ca/ holds ca-certificates.crt (the bundle `npm config get cafile` names) and the machine's local CAs;
# it is empty where the machine has none, and the image then trusts what each tool trusts by default.
COPY ca/ /usr/local/share/ca-certificates/
RUN set -eu; \
    rm -f /usr/local/share/ca-certificates/.keep; \
    if [ -f /usr/local/share/ca-certificates/ca-certificates.crt ]; then \
      mkdir -p /etc/ssl/certs; \
      mv /usr/local/share/ca-certificates/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt; \
      printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > /etc/pip.conf; \
    fi
CMD ["bash"]
