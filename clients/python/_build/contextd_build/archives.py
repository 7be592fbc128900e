"""Writing the wheel (a zip, PEP 427) and the sdist (a tar.gz, PEP 517 / 625).

Both are reproducible: entries sorted, every timestamp SOURCE_DATE_EPOCH (or 1980-01-01, the
earliest a zip can store), and ownership and modes normalised — the same tree builds the same bytes.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import tarfile
import time
import zipfile
from pathlib import Path

from contextd_build.project import Project, metadata, package_files, sdist_files, wheel_file

ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


def _epoch() -> int:
    try:
        return max(int(os.environ.get("SOURCE_DATE_EPOCH", ZIP_EPOCH)), ZIP_EPOCH)
    except ValueError:
        return ZIP_EPOCH


def record_hash(data: bytes) -> str:
    """`sha256=<urlsafe base64, no padding>`, as RECORD spells a file's hash (PEP 376 / 427)."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def dist_info_files(project: Project) -> dict[str, bytes]:
    """METADATA, WHEEL and top_level.txt: what prepare_metadata_for_build_wheel writes, and the wheel
    carries (without RECORD, which depends on the other files)."""
    return {
        "METADATA": metadata(project).encode("utf-8"),
        "WHEEL": wheel_file().encode("utf-8"),
        "top_level.txt": f"{project.package_dir.name}\n".encode("utf-8"),
    }


def write_metadata_dir(project: Project, directory: Path) -> str:
    target = directory / project.dist_info
    target.mkdir(parents=True, exist_ok=True)
    for name, data in dist_info_files(project).items():
        (target / name).write_bytes(data)
    return project.dist_info


def write_wheel(project: Project, directory: Path) -> str:
    """Writes the wheel into `directory`; returns its file name."""
    entries: list[tuple[str, bytes]] = [
        (path.as_posix(), (project.root / path).read_bytes()) for path in package_files(project)
    ]
    entries += [(f"{project.dist_info}/{name}", data) for name, data in dist_info_files(project).items()]
    record_path = f"{project.dist_info}/RECORD"
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{record_path},,\n"
    entries.append((record_path, record.encode("utf-8")))

    directory.mkdir(parents=True, exist_ok=True)
    final = directory / project.wheel_name
    partial = final.with_name(final.name + ".part")
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    # A wheel is written beside its final name and renamed, so a failed build leaves no truncated wheel.
    partial.replace(final)
    return final.name


def write_sdist(project: Project, directory: Path) -> str:
    """Writes the sdist into `directory`; returns its file name."""
    base = f"{project.dist_name}-{project.version}"
    epoch = _epoch()
    members: list[tuple[str, bytes]] = [
        (f"{base}/{path.as_posix()}", (project.root / path).read_bytes()) for path in sdist_files(project)
    ]
    members.append((f"{base}/PKG-INFO", metadata(project).encode("utf-8")))
    members.sort()

    directory.mkdir(parents=True, exist_ok=True)
    final = directory / project.sdist_name
    partial = final.with_name(final.name + ".part")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = epoch
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    with open(partial, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=epoch) as gz:
        gz.write(raw.getvalue())
    partial.replace(final)
    return final.name
