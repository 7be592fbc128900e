# The Python sample engine `window` (engines/window), on Debian's Python with Debian's grpcio.
#
#   docker build -f docker/window.Dockerfile -t contextd-window:local .      # context: the repository root
#
# Nothing comes from PyPI and nothing is generated at build time: python3-grpcio and python3-protobuf
# are Debian packages, and the engine runs on the repository's own Python package (clients/python:
# the engine SDK contextd.engine and the committed gRPC stubs contextd.v1 / contextd.health.v1).

FROM debian:bookworm-slim

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-grpcio python3-protobuf \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -c "import grpc, google.protobuf"

# The same layout as the repository: engines/window/main.py finds the package at ../../clients/python
# (PYTHONPATH says so too, for anything else run in the image).
WORKDIR /app
COPY clients/python/contextd ./clients/python/contextd
COPY engines/window ./engines/window

# An unprivileged user; the engine writes nothing to disk.
RUN groupadd --system --gid 10001 window \
 && useradd --system --uid 10001 --gid window --home-dir /app --no-create-home --shell /usr/sbin/nologin window

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH=/app/clients/python
USER window
# Fails the build if the package or the engine does not import with the image's grpcio.
RUN cd /app/engines/window && python3 -c "import contextd.engine, window_engine"

CMD ["python3", "engines/window/main.py"]
