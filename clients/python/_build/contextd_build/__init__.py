"""contextd_build: the in-tree PEP 517 build backend of the `contextd` Python package.

Why not setuptools, hatchling or flit: `pip install ./clients/python` must work with no network.
pip builds a project in an isolated environment and first installs its `build-system.requires`
from an index; on a machine without PyPI (contextd's CI image, air-gapped hosts, Debian's python3
with python3-grpcio) any requirement there fails the install before a line of our code runs.
pyproject.toml therefore says `requires = []` and `backend-path = ["_build"]`, and this backend does
the little a pure-Python package needs with the standard library alone (tomllib, zipfile, tarfile,
hashlib): a wheel tagged py3-none-any with METADATA, WHEEL and a RECORD of sha256 hashes, and an
sdist that carries this backend so it builds the same way again.

Hooks (PEP 517): build_wheel, build_sdist, prepare_metadata_for_build_wheel, and
get_requires_for_build_wheel / get_requires_for_build_sdist (both: nothing). Editable installs
(PEP 660) are not offered: use `PYTHONPATH=clients/python` for a working tree.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from contextd_build.archives import write_metadata_dir, write_sdist, write_wheel
from contextd_build.project import ProjectError, load

__all__ = [
    "ProjectError",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_wheel",
]

log = logging.getLogger("contextd_build")

ConfigSettings = dict[str, Any] | None


def _project_root() -> Path:
    # PEP 517: hooks run with the source tree's root as the working directory.
    return Path.cwd()


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    """Nothing: the point of this backend (see the module docstring)."""
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: ConfigSettings = None) -> str:
    """Writes <name>-<version>.dist-info (METADATA, WHEEL, top_level.txt) and returns its name, so pip
    can resolve the dependencies before building the wheel."""
    return write_metadata_dir(load(_project_root()), Path(metadata_directory))


def build_wheel(
    wheel_directory: str, config_settings: ConfigSettings = None, metadata_directory: str | None = None
) -> str:
    """Builds the wheel into `wheel_directory`; returns its file name. The metadata is derived again
    from pyproject.toml: it is the same as what prepare_metadata_for_build_wheel wrote."""
    name = write_wheel(load(_project_root()), Path(wheel_directory))
    log.info("built %s", name)
    return name


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """Builds the source distribution into `sdist_directory`; returns its file name."""
    name = write_sdist(load(_project_root()), Path(sdist_directory))
    log.info("built %s", name)
    return name
