# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The one path-safe way gpufleet writes a file: markers, mirror files, reports, the release data.

Every write goes to a new temporary file beside the target (created O_EXCL, so never through a link an
attacker planted), is flushed to disk, and is renamed over the target: a reader, a full disk or a kill
sees the old file or the new one, never a part of one. A target that is a symbolic link is refused, not
followed, so a link planted where gpufleet writes can never make it truncate or replace the file it
points to. open_existing() reads or appends to a file without following a link (O_NOFOLLOW).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class UnsafePath(OSError):
    """The path is a symbolic link (or not a regular file) where gpufleet writes its own files."""


def refuse_link(path: Path) -> None:
    """Raises UnsafePath when `path` exists and is a symbolic link or not a regular file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symbolic link (to {os.readlink(path)}); gpufleet writes only its own "
                         "regular files there: remove the link")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePath(f"{path} is not a regular file; gpufleet writes only its own regular files there: "
                         "remove it or choose another path")


def write_atomically(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Writes `data` (text as UTF-8) to a temporary file beside `path`, then renames it over `path`.
    Refuses a `path` that is a symbolic link; the temporary file is removed on any failure."""
    path = Path(path)
    refuse_link(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def open_existing(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor for `path` opened with O_NOFOLLOW (and O_CREAT when asked): a link is refused with
    UnsafePath instead of being followed; anything but a regular file too."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePath(f"{path} is a symbolic link (to {os.readlink(path)}); gpufleet writes only its own "
                             "regular files there: remove the link") from None
        raise exc
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise UnsafePath(f"{path} is not a regular file; gpufleet writes only its own regular files there")
    return descriptor
