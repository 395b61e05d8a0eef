# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The artifacts directory of one run: claimed, locked, cleared of the last run's output, written atomically.

A directory is gpufleet's when it holds the marker file `.gpufleet-artifacts` (written when gpufleet
made the directory, or found it empty). Only then does gpufleet clear what it wrote last time
(reports/, runner/); a non-empty directory without the marker is refused, whatever is in it. The
marker is opened without following a link (a link there refuses the directory). It is also the lock:
a run holds an exclusive flock on it until its summary is written, so a
second run on the same directory is refused instead of mixing its reports with the first's.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from gpufleet.safe_files import UnsafePath, open_existing, refuse_link
from gpufleet.safe_files import write_atomically  # noqa: F401 - the one writer, used here and by cli

MARKER = ".gpufleet-artifacts"
REPORTS = "reports"
RUNNER_COPY = "runner"
SUMMARY_FILE = "summary.json"


class ArtifactsRefused(Exception):
    """The directory is not gpufleet's or another run holds it: nothing may be written there."""


class ArtifactsUnwritable(Exception):
    """The directory cannot be created or written."""


def default_directory(stage: str | None, started_at: datetime, parent: Path = Path("artifacts")) -> Path:
    """artifacts/<stage>-<UTC time to the microsecond>; claim() takes the next free name on a clash."""
    return parent / f"{stage or 'gpufleet'}-{started_at:%Y%m%dT%H%M%S.%fZ}"


class ArtifactsDir:
    """A claimed artifacts directory; release() (or the end of the process) lets the next run in."""

    def __init__(self, path: Path, lock_handle):
        self.path = path
        self._lock_handle = lock_handle

    @property
    def reports(self) -> Path:
        return self.path / REPORTS

    @property
    def runner_copy(self) -> Path:
        return self.path / RUNNER_COPY

    def write_summary(self, text: str) -> Path:
        path = self.path / SUMMARY_FILE
        write_atomically(path, text)
        return path

    def release(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()  # closing the descriptor drops the flock
            self._lock_handle = None

    def __enter__(self) -> ArtifactsDir:
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def _refuse_foreign(path: Path) -> None:
    try:
        refuse_link(path / MARKER)  # a planted link is no marker: opening it would truncate what it points to
    except UnsafePath as exc:
        raise ArtifactsRefused(f"artifacts directory {path} is refused: {exc}") from None
    if not path.is_dir() or (path / MARKER).is_file():
        return
    entries = sorted(p.name for p in path.iterdir())
    if entries:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise ArtifactsRefused(
            f"artifacts directory {path} is not empty ({shown}) and is not a gpufleet artifacts directory "
            f"(no {MARKER} in it); give a new or empty directory, so nothing in it is overwritten or deleted")


def _lock(path: Path):
    try:  # never through a link, even one planted after _refuse_foreign looked
        descriptor = open_existing(path / MARKER, os.O_RDWR | os.O_CREAT)
    except UnsafePath as exc:
        raise ArtifactsRefused(f"artifacts directory {path} is refused: {exc}") from None
    handle = os.fdopen(descriptor, "r+", encoding="utf-8")  # pylint: disable=consider-using-with
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            try:
                who = json.loads(holder)
                detail = f" (pid {who.get('pid')}, started {who.get('started_at')})"
            except ValueError:
                detail = ""
            raise ArtifactsRefused(f"artifacts directory {path} is in use by another gpufleet run{detail}; "
                                   "wait for it to finish or give another --artifacts directory") from None
        raise
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "started_at": datetime.now(timezone.utc).isoformat()}) + "\n")
    handle.flush()
    return handle


def _make_unique(path: Path) -> Path:
    """Creates a new directory at `path`, or at path-2, path-3, ... when another run took the name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, 1000):
        candidate = path if number == 1 else path.with_name(f"{path.name}-{number}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise ArtifactsUnwritable(f"no free artifacts directory name beside {path}")


def claim(path: Path, new: bool = False) -> ArtifactsDir:
    """Claims `path` for one run: refuses it when it is not gpufleet's or in use, locks it, and removes
    what the last run there wrote (its reports and runner output). `new` makes a fresh directory
    (the default name), never reusing one."""
    path = path.absolute()
    try:
        if new:
            path = _make_unique(path)
        else:
            _refuse_foreign(path)
            path.mkdir(parents=True, exist_ok=True)
        handle = _lock(path)
    except ArtifactsRefused:
        raise
    except OSError as exc:
        raise ArtifactsUnwritable(f"artifacts directory {path} is not writable: {exc.strerror or exc}") from None
    claimed = ArtifactsDir(path, handle)
    try:
        for name in (REPORTS, RUNNER_COPY):
            if (path / name).is_symlink() or (path / name).is_file():
                (path / name).unlink()
            elif (path / name).exists():
                shutil.rmtree(path / name)
            (path / name).mkdir()
    except OSError as exc:
        claimed.release()
        raise ArtifactsUnwritable(f"artifacts directory {path} is not writable: {exc.strerror or exc}") from None
    return claimed
