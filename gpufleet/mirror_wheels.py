# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The wheels a plan installs (torch and its companions, the pytorch role's extra packages, and all
their dependencies) for the nodes' Python and platform, downloaded with pip and laid out as a flat
wheel directory plus a PEP 503 simple index.

pip runs in isolated mode with no configuration file at all (PIP_CONFIG_FILE=/dev/null, no PIP_*
variables), so a controller's pip.conf (constraints, find-links, extra indexes) cannot change what
is mirrored. pip first resolves (`install --dry-run --report`, which names each file's URL and the
index's SHA256), then downloads exactly those files (`download --no-deps 'name @ url#sha256=...'`,
which checks the hash); the files are checked once more here.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from gpufleet import children
from gpufleet.mirror_apt import sha256_of
from gpufleet.mirror_targets import MirrorError
from gpufleet.safe_files import write_atomically

# pip's --report appeared in pip 22.2.
MIN_PIP = (22, 2)
# A wheel's file name (PEP 427): name-version[-build]-python-abi-platform.whl, each part without "/" or "-".
# Nothing else is taken as the name of a file the mirror writes.
_WHEEL_FILENAME = re.compile(r"^[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-[0-9][A-Za-z0-9_.]*)?"
                             r"-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl$")
# Oldest glibc each legacy manylinux tag stands for (PEP 600).
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


@dataclass(frozen=True)
class WheelSpec:
    """One resolution: these requirements for this Python and platform, from this source."""

    requirements: tuple[str, ...]
    python: str  # X.Y
    glibc: str  # X.Y of the nodes' C library
    machine: str  # x86_64, aarch64
    source: str  # an index URL, or a directory / file: URL of wheels
    lock: str = ""  # a requirements file with --hash= pins (pytorch_requirements_lock): pip takes exactly it


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    url: str
    sha256: str  # the index's; empty when the index published none

    def __post_init__(self) -> None:
        self.filename  # pylint: disable=pointless-statement  # a URL that names no wheel file is refused at once

    @property
    def filename(self) -> str:
        """The unquoted last segment of the URL's path, once it is a plain wheel file name: "%2F" in an index's
        link unquotes to "/", and such a name would be a path out of the mirror."""
        name = urllib.parse.unquote(urllib.parse.urlparse(self.url).path.rsplit("/", 1)[-1])
        if not _WHEEL_FILENAME.match(name) or name.startswith("."):
            raise MirrorError(f"the wheel index links {self.name} {self.version} as {self.url}, whose last path segment "
                              f"{name!r} is not a wheel file name (name-version-python-abi-platform.whl, no '/' or '..'); "
                              "nothing from that index is mirrored: check the index or give another --wheel-source")
        return name


def platform_tags(machine: str, glibc: str) -> list[str]:
    """The manylinux tags a glibc-X.Y Linux on `machine` accepts, newest first, and the plain linux tag
    (download.pytorch.org tags its wheels linux_x86_64). pip expands none of these by itself."""
    try:
        major, minor = (int(part) for part in glibc.split(".")[:2])
    except ValueError:
        raise MirrorError(f"glibc version {glibc!r} is not X.Y (the nodes' `ldd --version`)") from None
    if major != 2:
        raise MirrorError(f"glibc version {glibc!r}: only glibc 2.x is known to manylinux")
    oldest = 5 if machine in ("x86_64", "i686") else 17
    tags = []
    for number in range(minor, oldest - 1, -1):
        tags.append(f"manylinux_2_{number}_{machine}")
        if number in _LEGACY_MANYLINUX:  # 2_5 and 2_12 exist only for x86 (oldest is 17 elsewhere)
            tags.append(f"{_LEGACY_MANYLINUX[number]}_{machine}")
    return tags + [f"linux_{machine}"]


def source_args(source: str) -> list[str]:
    """A directory (or file: URL) of wheels is read alone (--no-index --find-links); a URL is the only index."""
    parsed = urllib.parse.urlparse(source)
    if parsed.scheme in ("http", "https"):
        return ["--index-url", source]
    path = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else source
    if not Path(path).is_dir():
        raise MirrorError(f"wheel source {source!r} is neither an http(s) index URL nor a directory of wheels")
    return ["--no-index", "--find-links", path]


def pip_env(scratch: Path | None = None) -> dict:
    """The environment pip runs in: no PIP_* variable and no configuration file of this machine. Its temporary
    directories go to `scratch`, inside the mirror's own work directory, so a cancelled run (pip killed before it
    could clean up) leaves none of pip's behind in /tmp: the mirror removes its work directory on every exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    if scratch is not None:
        env["TMPDIR"] = str(scratch)
    return env


def common_args(spec: WheelSpec, cache: Path) -> list[str]:
    args = ["--isolated", "--disable-pip-version-check", "--no-input", "--cache-dir", str(cache),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", spec.python]
    for tag in platform_tags(spec.machine, spec.glibc):
        args += ["--platform", tag]
    return args


def requirement_args(spec: WheelSpec, work: Path) -> list[str]:
    """The requirements, or the lock file (as the pytorch role installs it: --require-hashes -r)."""
    if not spec.lock:
        return list(spec.requirements)
    lock = work / "requirements.lock"
    write_atomically(lock, spec.lock)
    return ["--require-hashes", "-r", str(lock)]


def report_argv(spec: WheelSpec, report: Path, target: Path, cache: Path, requirements: list[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report),
            "--target", str(target), *common_args(spec, cache), *source_args(spec.source), *requirements]


def download_argv(spec: WheelSpec, wheels: list[Wheel], dest: Path, cache: Path) -> list[str]:
    pinned = [f"{w.name} @ {w.url.split('#')[0]}" + (f"#sha256={w.sha256}" if w.sha256 else "") for w in wheels]
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest), *common_args(spec, cache),
            *source_args(spec.source), *pinned]


def parse_report(report: dict) -> list[Wheel]:
    out = []
    for item in report.get("install", []):
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        if not hashes and "sha256=" in (info.get("archive_info") or {}).get("hash", ""):
            hashes = {"sha256": info["archive_info"]["hash"].split("=", 1)[1]}
        out.append(Wheel(item["metadata"]["name"], item["metadata"]["version"], info["url"], hashes.get("sha256", "")))
    return out


def check_pip() -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True,
                          env=pip_env(), check=False)
    found = re.match(r"pip (\d+)\.(\d+)", proc.stdout)
    if proc.returncode != 0 or not found or tuple(int(x) for x in found.groups()) < MIN_PIP:
        raise MirrorError(f"pip {'.'.join(map(str, MIN_PIP))} or newer is needed in {sys.executable}'s environment "
                          f"(found: {proc.stdout.strip() or proc.stderr.strip() or 'none'}); "
                          f"`{sys.executable} -m pip install -U pip`")


def _pip(argv: list[str], what: str, scratch: Path) -> None:
    # On any exception (SIGINT, SIGTERM as Cancelled) run() kills pip and waits for it before the work goes.
    proc = children.run(argv, capture_output=True, text=True, env=pip_env(scratch), check=False)
    if proc.returncode != 0:
        said = " | ".join(line.strip() for line in (proc.stderr or proc.stdout).splitlines()
                          if line.startswith("ERROR") or re.match(r"\s+(\S+ from \S+:|Expected sha256|Got )", line))
        if "DO NOT MATCH THE HASHES" in proc.stderr:
            what = f"checksum mismatch: the index's SHA256 and the file served differ ({what})"
        raise MirrorError(f"{what}: {said or (proc.stderr or proc.stdout).strip()[-1500:]}")


def fetch_wheels(spec: WheelSpec, work: Path) -> list[tuple[Wheel, Path]]:
    """Resolve and download; every file checked against the index's SHA256 where it published one."""
    cache, dest, target, scratch = work / "pip-cache", work / "download", work / "target", work / "tmp"
    dest.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(exist_ok=True)
    report = work / "report.json"
    what = "the lock file's pins" if spec.lock else " ".join(spec.requirements)
    where = f"{what} for Python {spec.python} on {spec.machine} (glibc {spec.glibc}) from {spec.source}"
    _pip(report_argv(spec, report, target, cache, requirement_args(spec, work)), f"pip cannot resolve {where}",
         scratch)
    wheels = parse_report(json.loads(report.read_text()))
    _pip(download_argv(spec, wheels, dest, cache), f"pip could not download {where}", scratch)
    out = []
    for wheel in wheels:
        path = dest / wheel.filename
        if not path.exists():
            raise MirrorError(f"pip reported {wheel.url} but left no {wheel.filename} in {dest}")
        digest = sha256_of(path)
        if wheel.sha256 and digest != wheel.sha256:
            raise MirrorError(f"checksum mismatch: {wheel.filename} from {wheel.url} has SHA256 {digest}; the index "
                              f"says {wheel.sha256}. Nothing from it is mirrored")
        out.append((Wheel(wheel.name, wheel.version, wheel.url, wheel.sha256), path))
    return out


def normalize(name: str) -> str:
    """PEP 503's project name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


LOCK_HEADER = ("# gpufleet mirror: every wheel of this mirror pinned with its SHA256 (pip --require-hashes -r).\n"
               "# The pytorch role installs from it; the inventory pins this file by gpufleet_pytorch_mirror_lock_sha256.\n")


def hash_lock(files: dict[str, tuple[str, str, str]]) -> str:
    """pip's hash-checking requirements form for {filename: (project, version, sha256)}: one `name==version`
    per project (PEP 503 name) with the hash of each of its files. A project held at two versions cannot be
    pinned by one lock: MirrorError names it."""
    pins: dict[str, dict[str, set[str]]] = {}
    for _filename, (project, version, digest) in sorted(files.items()):
        pins.setdefault(normalize(project), {}).setdefault(version, set()).add(digest)
    several = {name: sorted(versions) for name, versions in pins.items() if len(versions) > 1}
    if several:
        raise MirrorError("the mirror holds " + "; ".join(f"{name} at {' and '.join(v)}" for name, v in sorted(several.items()))
                          + ", which one hash lock cannot pin (nodes with different plans or Python releases)")
    lines = []
    for name, versions in sorted(pins.items()):
        (version, digests), = versions.items()
        hashes = [f"    --hash=sha256:{digest}" for digest in sorted(digests)]
        lines += [f"{name}=={version} \\"] + [h + " \\" for h in hashes[:-1]] + hashes[-1:]
    return LOCK_HEADER + "\n".join(lines) + "\n"


def simple_index(files: dict[str, tuple[str, str]]) -> dict[str, str]:
    """PEP 503 pages for {filename: (project name, sha256)}: {relative path under wheels/: html}."""
    projects: dict[str, list[tuple[str, str]]] = {}
    for filename, (project, digest) in sorted(files.items()):
        projects.setdefault(normalize(project), []).append((filename, digest))
    pages = {"simple/index.html": _page("Simple index", [(f"{p}/", p) for p in sorted(projects)])}
    for project, entries in projects.items():
        links = [(f"../../{urllib.parse.quote(name)}#sha256={digest}", name) for name, digest in entries]
        pages[f"simple/{project}/index.html"] = _page(f"Links for {project}", links)
    return pages


def _page(title: str, links: list[tuple[str, str]]) -> str:
    body = "\n".join(f'    <a href="{html.escape(href)}">{html.escape(text)}</a><br/>' for href, text in links)
    return (f"<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>{html.escape(title)}</title></head>\n  <body>\n{body}\n  </body>\n</html>\n")
