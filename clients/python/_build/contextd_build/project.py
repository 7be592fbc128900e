"""What pyproject.toml says about the distribution, and which files belong to it.

Only the [project] keys this backend writes into METADATA are accepted; any other key is an error
naming it, so a key someone adds to pyproject.toml can never be dropped from the wheel unnoticed.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SUPPORTED_KEYS = frozenset(
    {"name", "version", "description", "readme", "requires-python", "license", "dependencies", "classifiers",
     "keywords", "urls"}
)
REQUIRED_KEYS = ("name", "version")
# Never shipped: bytecode caches are per interpreter, and editors' and test runs' leftovers are not source.
EXCLUDED_PARTS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".tmp", "~")
# What the sdist carries next to the package: enough to build the wheel again, and to test it.
SDIST_EXTRAS = ("pyproject.toml", "README.md", "_build", "generate_stubs.py", "tests")


class ProjectError(Exception):
    """pyproject.toml asks for something this backend does not do."""


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    version: str
    description: str = ""
    readme: str | None = None
    requires_python: str | None = None
    license: str | None = None
    dependencies: tuple[str, ...] = ()
    classifiers: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    urls: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def package_dir(self) -> Path:
        """The import package shipped in the wheel: the directory named like the project."""
        return self.root / self.name.replace("-", "_")

    @property
    def dist_name(self) -> str:
        """The name as wheel and sdist file names spell it (PEP 427 / PEP 625)."""
        return re.sub(r"[-_.]+", "_", self.name).lower()

    @property
    def dist_info(self) -> str:
        return f"{self.dist_name}-{self.version}.dist-info"

    @property
    def wheel_name(self) -> str:
        return f"{self.dist_name}-{self.version}-py3-none-any.whl"

    @property
    def sdist_name(self) -> str:
        return f"{self.dist_name}-{self.version}.tar.gz"


def load(root: Path) -> Project:
    """Reads root/pyproject.toml."""
    path = root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ProjectError(f"{path}: {err}") from err
    table = data.get("project")
    if not isinstance(table, dict):
        raise ProjectError(f"{path}: no [project] table")
    unknown = sorted(set(table) - SUPPORTED_KEYS)
    if unknown:
        raise ProjectError(f"{path}: [project] {', '.join(unknown)} not supported by contextd_build "
                           f"(it supports {', '.join(sorted(SUPPORTED_KEYS))})")
    for key in REQUIRED_KEYS:
        if not isinstance(table.get(key), str) or not table[key]:
            raise ProjectError(f"{path}: [project] {key} is required (a string)")
    license_ = table.get("license")
    if isinstance(license_, dict):
        license_ = license_.get("text")
    readme = table.get("readme")
    if readme is not None and not isinstance(readme, str):
        raise ProjectError(f"{path}: [project] readme must be a file name (a string)")
    project = Project(
        root=root,
        name=table["name"],
        version=table["version"],
        description=table.get("description", ""),
        readme=readme,
        requires_python=table.get("requires-python"),
        license=license_ if isinstance(license_, str) else None,
        dependencies=tuple(table.get("dependencies", ())),
        classifiers=tuple(table.get("classifiers", ())),
        keywords=tuple(table.get("keywords", ())),
        urls=tuple(sorted(table.get("urls", {}).items())),
    )
    if not (project.package_dir / "__init__.py").is_file():
        raise ProjectError(f"{project.package_dir}/__init__.py not found: the package is named after the project")
    return project


def metadata(project: Project) -> str:
    """The core metadata (METADATA in the wheel, PKG-INFO in the sdist), version 2.1."""
    lines = ["Metadata-Version: 2.1", f"Name: {project.name}", f"Version: {project.version}"]
    if project.description:
        lines.append(f"Summary: {project.description}")
    if project.license:
        lines.append(f"License: {project.license}")
    if project.keywords:
        lines.append(f"Keywords: {','.join(project.keywords)}")
    lines += [f"Classifier: {c}" for c in project.classifiers]
    lines += [f"Project-URL: {label}, {url}" for label, url in project.urls]
    if project.requires_python:
        lines.append(f"Requires-Python: {project.requires_python}")
    lines += [f"Requires-Dist: {d}" for d in project.dependencies]
    body = ""
    if project.readme:
        readme = project.root / project.readme
        kind = "text/markdown" if readme.suffix.lower() == ".md" else "text/plain"
        lines.append(f"Description-Content-Type: {kind}")
        body = readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def wheel_file() -> str:
    """The WHEEL file: a pure-Python wheel for every Python 3."""
    return "Wheel-Version: 1.0\nGenerator: contextd_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _shipped(path: Path) -> bool:
    return not (EXCLUDED_PARTS & set(path.parts)) and not path.name.endswith(EXCLUDED_SUFFIXES)


def files_under(root: Path, directory: Path) -> list[Path]:
    """Every regular file under `directory` that ships, relative to `root`, sorted (so archives are
    byte-for-byte reproducible)."""
    return sorted(p.relative_to(root) for p in directory.rglob("*") if p.is_file() and _shipped(p.relative_to(root)))


def package_files(project: Project) -> list[Path]:
    return files_under(project.root, project.package_dir)


def sdist_files(project: Project) -> list[Path]:
    out = package_files(project)
    for extra in SDIST_EXTRAS:
        path = project.root / extra
        if path.is_dir():
            out += files_under(project.root, path)
        elif path.is_file():
            out.append(Path(extra))
    return sorted(set(out))
