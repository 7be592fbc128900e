"""Where the package under test lives, for tests that build it or run it in a fresh interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
BUILD_BACKEND_DIR = PACKAGE_ROOT / "_build"

# The tests import the package from this tree, whatever PYTHONPATH the runner was given.
if str(PACKAGE_ROOT) not in sys.path:
    sys.path.insert(0, str(PACKAGE_ROOT))
