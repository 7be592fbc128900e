"""grpc.health.v1 stubs, generated under this package so that nothing shadows grpcio's `grpc`.

Debian's python3-grpcio ships no `grpc_health` module; PyPI's grpcio-health-checking registers the
same message names (grpc.health.v1.*) and must not be imported into the same process.
"""
