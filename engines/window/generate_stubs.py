#!/usr/bin/python3
"""Generates the Python gRPC stubs the window engine imports, from the repository's .proto files.

Nothing generated is checked in: the stubs are built with Debian's protoc (/usr/bin/protoc) and
grpc plugin (/usr/bin/grpc_python_plugin) into a cache directory keyed by a hash of the inputs,

    engines/window/.gen/<hash>/contextd/v1/*_pb2.py, *_pb2_grpc.py
    engines/window/.gen/<hash>/health/v1/health_pb2.py, health_pb2_grpc.py

so a changed .proto (or another protoc) produces a fresh directory and a stale one is never used.
Generation writes into a temporary directory and renames it into place, so several processes
starting at once (tests, a restarted sidecar) never see a half-written cache.

Inputs (paths are resolved relative to this file, never the working directory):
  - proto/contextd/v1/*.proto of the repository (override: WINDOW_PROTO_ROOT, the dir holding `contextd/`)
  - grpc.health.v1 from node_modules/grpc-health-check/proto/health/v1/health.proto
    (override: WINDOW_HEALTH_PROTO_ROOT, the dir holding `health/v1/health.proto`)
  - WINDOW_PROTOC / WINDOW_GRPC_PYTHON_PLUGIN override the tools; WINDOW_STUBS_DIR the cache root.

Run it by hand to (re)generate and print the directory:  /usr/bin/python3 engines/window/generate_stubs.py
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

PROTOC = os.environ.get("WINDOW_PROTOC") or "/usr/bin/protoc"
GRPC_PYTHON_PLUGIN = os.environ.get("WINDOW_GRPC_PYTHON_PLUGIN") or "/usr/bin/grpc_python_plugin"
PROTO_ROOT = os.environ.get("WINDOW_PROTO_ROOT") or os.path.join(REPO_ROOT, "proto")
HEALTH_PROTO_ROOT = os.environ.get("WINDOW_HEALTH_PROTO_ROOT") or os.path.join(REPO_ROOT, "node_modules", "grpc-health-check", "proto")
HEALTH_PROTO = "health/v1/health.proto"
CACHE_ROOT = os.environ.get("WINDOW_STUBS_DIR") or os.path.join(HERE, ".gen")
MARKER = ".complete"
# Other cache dirs untouched for this long are removed (they belong to older protos).
PRUNE_AFTER_S = 3600


class StubError(RuntimeError):
    """The stubs cannot be generated (missing tool or proto, protoc failed)."""


def _contextd_protos():
    pkg = os.path.join(PROTO_ROOT, "contextd", "v1")
    try:
        names = sorted(f for f in os.listdir(pkg) if f.endswith(".proto"))
    except OSError as e:
        raise StubError("cannot list the contract protos in %s: %s" % (pkg, e))
    if not names:
        raise StubError("no .proto files in %s" % pkg)
    return ["contextd/v1/" + n for n in names]


def _inputs():
    """(relative name, absolute path) of every proto that goes into the stubs."""
    files = [(rel, os.path.join(PROTO_ROOT, rel)) for rel in _contextd_protos()]
    health = os.path.join(HEALTH_PROTO_ROOT, HEALTH_PROTO)
    if not os.path.isfile(health):
        raise StubError(
            "grpc.health.v1 proto not found at %s (run `npm ci` in the repository, or set WINDOW_HEALTH_PROTO_ROOT)" % health
        )
    files.append((HEALTH_PROTO, health))
    return files


def _tool_version(path):
    try:
        st = os.stat(path)
    except OSError:
        raise StubError("%s not found (Debian: apt-get install protobuf-compiler protobuf-compiler-grpc)" % path)
    return "%s:%d:%d" % (path, st.st_size, int(st.st_mtime))


def stubs_key():
    """A hash of the proto files' contents and the tools that compile them."""
    h = hashlib.sha256()
    for rel, path in _inputs():
        h.update(rel.encode())
        h.update(b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    h.update(_tool_version(PROTOC).encode())
    h.update(_tool_version(GRPC_PYTHON_PLUGIN).encode())
    return h.hexdigest()[:16]


def _generate_into(out_dir):
    inputs = _inputs()
    contextd = [rel for rel, _ in inputs if rel.startswith("contextd/")]
    base = [
        PROTOC,
        "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        "--plugin=protoc-gen-grpc_python=" + GRPC_PYTHON_PLUGIN,
    ]
    # Two runs: the include roots differ, and protoc wants every input under one of them.
    for cmd in (base + ["-I" + PROTO_ROOT] + contextd, base + ["-I" + HEALTH_PROTO_ROOT, HEALTH_PROTO]):
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if res.returncode != 0:
            raise StubError("protoc failed (%s): %s" % (" ".join(cmd), (res.stderr or res.stdout).strip()))
    for pkg in ("contextd", os.path.join("contextd", "v1"), "health", os.path.join("health", "v1")):
        init = os.path.join(out_dir, pkg, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
    open(os.path.join(out_dir, MARKER), "w").close()


def _prune(keep):
    now = time.time()
    try:
        names = os.listdir(CACHE_ROOT)
    except OSError:
        return
    for name in names:
        path = os.path.join(CACHE_ROOT, name)
        if path == keep:
            continue
        try:
            if now - os.stat(path).st_mtime > PRUNE_AFTER_S:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # raced with another process: fine


def ensure_stubs():
    """Generates the stubs if missing or stale; returns the directory to put on sys.path."""
    key = stubs_key()
    final = os.path.join(CACHE_ROOT, key)
    if os.path.isfile(os.path.join(final, MARKER)):
        return final
    os.makedirs(CACHE_ROOT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-%s-" % key, dir=CACHE_ROOT)
    try:
        _generate_into(tmp)
        try:
            os.rename(tmp, final)
            tmp = None
        except OSError:
            # Another process finished the same generation first (or a broken leftover is in the way).
            if not os.path.isfile(os.path.join(final, MARKER)):
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
                tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _prune(final)
    return final


def import_path():
    """ensure_stubs(), and puts the directory first on sys.path so `from contextd.v1 import ...` works."""
    path = ensure_stubs()
    if path not in sys.path:
        sys.path.insert(0, path)
    return path


if __name__ == "__main__":
    try:
        print(ensure_stubs())
    except StubError as e:
        sys.stderr.write("generate_stubs: %s\n" % e)
        sys.exit(1)
