"""What `import contextd` gives a runtime, and what it must not load."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from _paths import PACKAGE_ROOT

import contextd
from contextd.v1 import types_pb2


class PackageTest(unittest.TestCase):
    def test_enums_print_their_names(self) -> None:
        self.assertEqual(contextd.Mode.Name(contextd.Mode.MODE_FALLBACK), "MODE_FALLBACK")
        self.assertEqual(contextd.Role.Name(contextd.Role.ROLE_TOOL_RESULT), "ROLE_TOOL_RESULT")
        self.assertEqual(contextd.Role.Value("ROLE_USER"), types_pb2.ROLE_USER)
        self.assertEqual(contextd.PromptAuthority.Name(1), "PROMPT_AUTHORITY_ASSEMBLED")
        self.assertEqual(contextd.SubagentEndReason.Name(3), "SUBAGENT_END_REASON_SWEPT")

    def test_everything_in_all_exists(self) -> None:
        missing = [name for name in contextd.__all__ if not hasattr(contextd, name)]
        self.assertEqual(missing, [])

    def test_importing_contextd_loads_no_engine_code(self) -> None:
        # A runtime imports the client; the engine SDK (grpc servers, signal handlers) stays unloaded.
        probe = "import contextd, sys; print(sorted(m for m in sys.modules if m.startswith('contextd.engine')))"
        env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "[]")

    def test_grpc_is_grpcio_not_a_generated_shadow(self) -> None:
        import grpc

        self.assertTrue(hasattr(grpc, "insecure_channel"), grpc.__file__)
        self.assertNotIn(str(PACKAGE_ROOT), grpc.__file__)


if __name__ == "__main__":
    unittest.main()
