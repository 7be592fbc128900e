"""The in-tree PEP 517 backend builds a wheel pip can trust (RECORD hashes), the same bytes every
time, and an sdist that builds the same wheel again."""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
import zipfile
from pathlib import Path

from _paths import BUILD_BACKEND_DIR, PACKAGE_ROOT

sys.path.insert(0, str(BUILD_BACKEND_DIR))

import contextd  # noqa: E402
from contextd_build import project as proj  # noqa: E402
from contextd_build.archives import record_hash, write_sdist, write_wheel  # noqa: E402

HOOKS = "import contextd_build as b, json, sys; print(json.dumps(getattr(b, sys.argv[1])(*sys.argv[2:])))"


def run_hook(root: Path, hook: str, *args: str) -> str:
    """Calls a hook the way a frontend does: a fresh interpreter, cwd = the source tree."""
    env = {**os.environ, "PYTHONPATH": str(root / "_build"), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", HOOKS, hook, *args], cwd=root, env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().strip('"')


class WheelTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))

    def test_the_wheel_records_every_file_with_its_sha256(self) -> None:
        name = run_hook(PACKAGE_ROOT, "build_wheel", str(self.tmp))
        self.assertEqual(name, f"contextd-{contextd.__version__}-py3-none-any.whl")
        with zipfile.ZipFile(self.tmp / name) as whl:
            self.assertIsNone(whl.testzip())
            names = whl.namelist()
            dist_info = f"contextd-{contextd.__version__}.dist-info"
            record = whl.read(f"{dist_info}/RECORD").decode().splitlines()
            rows = dict((row.rsplit(",", 2)[0], row.rsplit(",", 2)[1:]) for row in record)
            self.assertEqual(sorted(rows), sorted(names))
            for member in names:
                digest, size = rows[member]
                if member.endswith("/RECORD"):
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = whl.read(member)
                self.assertEqual((digest, size), (record_hash(data), str(len(data))), member)
            wheel = email.parser.Parser().parsestr(whl.read(f"{dist_info}/WHEEL").decode())
            metadata = email.parser.Parser().parsestr(whl.read(f"{dist_info}/METADATA").decode())
        self.assertEqual((wheel["Root-Is-Purelib"], wheel["Tag"]), ("true", "py3-none-any"))
        self.assertEqual((metadata["Name"], metadata["Version"]), ("contextd", contextd.__version__))
        self.assertEqual(metadata.get_all("Requires-Dist"), ["grpcio>=1.51", "protobuf>=4.21"])
        self.assertIn("contextd/__init__.py", names)
        self.assertIn("contextd/v1/session_pb2.pyi", names)
        self.assertIn("contextd/health/v1/health_pb2_grpc.py", names)
        self.assertIn("contextd/py.typed", names)
        self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
        self.assertFalse([n for n in names if n.startswith(("tests/", "_build/"))])

    def test_the_same_tree_builds_the_same_bytes(self) -> None:
        project = proj.load(PACKAGE_ROOT)
        first, second = self.tmp / "a", self.tmp / "b"
        self.assertEqual((first / write_wheel(project, first)).read_bytes(),
                         (second / write_wheel(project, second)).read_bytes())
        self.assertEqual((first / write_sdist(project, first)).read_bytes(),
                         (second / write_sdist(project, second)).read_bytes())

    def test_metadata_is_prepared_without_a_wheel(self) -> None:
        self.assertEqual(run_hook(PACKAGE_ROOT, "get_requires_for_build_wheel"), "[]")
        dist_info = run_hook(PACKAGE_ROOT, "prepare_metadata_for_build_wheel", str(self.tmp))
        self.assertEqual(sorted(p.name for p in (self.tmp / dist_info).iterdir()), ["METADATA", "WHEEL", "top_level.txt"])


class SdistTest(unittest.TestCase):
    def test_the_sdist_builds_the_same_wheel(self) -> None:
        tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))
        name = run_hook(PACKAGE_ROOT, "build_sdist", str(tmp))
        self.assertEqual(name, f"contextd-{contextd.__version__}.tar.gz")
        base = f"contextd-{contextd.__version__}"
        with tarfile.open(tmp / name) as tar:
            members = tar.getnames()
            for needed in ("PKG-INFO", "pyproject.toml", "README.md", "_build/contextd_build/__init__.py",
                           "contextd/client.py"):
                self.assertIn(f"{base}/{needed}", members)
            tar.extractall(tmp / "src")  # our own archive, just built (3.11.2 has no extraction filters)
        wheel = run_hook(tmp / "src" / base, "build_wheel", str(tmp / "from-sdist"))
        direct = write_wheel(proj.load(PACKAGE_ROOT), tmp / "direct")
        self.assertEqual((tmp / "from-sdist" / wheel).read_bytes(), (tmp / "direct" / direct).read_bytes())


class ProjectTest(unittest.TestCase):
    def write(self, root: Path, project_table: str) -> Path:
        (root / "demo").mkdir()
        (root / "demo" / "__init__.py").write_text("")
        (root / "pyproject.toml").write_text(textwrap.dedent(project_table))
        return root

    def test_a_key_the_backend_does_not_write_is_an_error_naming_it(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = self.write(Path(tmp), '[project]\nname = "demo"\nversion = "1"\nscripts = { x = "demo:x" }\n')
            with self.assertRaisesRegex(proj.ProjectError, r"\[project\] scripts not supported"):
                proj.load(root)

    def test_name_and_version_are_required(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = self.write(Path(tmp), '[project]\nname = "demo"\n')
            with self.assertRaisesRegex(proj.ProjectError, r"\[project\] version is required"):
                proj.load(root)

    def test_the_version_is_the_package_version(self) -> None:
        self.assertEqual(proj.load(PACKAGE_ROOT).version, contextd.__version__)


if __name__ == "__main__":
    unittest.main()
