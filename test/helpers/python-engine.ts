/**
 * The Python misbehaving engine's prerequisites: Debian's python3 with grpc and protobuf, and the
 * `contextd` package (clients/python) with its committed stubs on PYTHONPATH.
 */
import path from "node:path";
import { PYTHON_PACKAGE_DIR, requirePythonGrpc } from "./python.js";
import { REPO_ROOT } from "./contextd-process.js";

export const PYTHON_ENGINE = path.join(REPO_ROOT, "test/engines/python/misbehaving_engine.py");

/**
 * True when the Python engine can run here (Debian python3 with grpc and protobuf); otherwise it
 * throws — it never answers false — so that the Python rows of a test fail instead of being skipped
 * quietly (CI installs the packages: .ci/run).
 */
export function pythonEnginesAvailable(): true {
  requirePythonGrpc();
  return true;
}

/**
 * The directory the Python engine needs on PYTHONPATH: clients/python, whose `contextd` package
 * carries the committed stubs (nothing is generated any more). Throws when Debian's python3 cannot
 * import grpc, so a test that needs the Python engine fails instead of skipping.
 */
export function ensurePythonEngineStubs(): string {
  requirePythonGrpc();
  return PYTHON_PACKAGE_DIR;
}
