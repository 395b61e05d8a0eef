# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The mirror directory: built in a staging directory and renamed into place only when complete; its
repositories indexed and signed with the mirror's own key; a manifest of every file; the inventory variables.

Why a key of the mirror's own: the mirror holds a subset of each upstream repository (what the plans
install), so upstream's signed index (which lists every package) cannot describe it. The mirror's
index keeps upstream's record for each package it holds (name, version, dependencies, SHA256 checked
against upstream's signed index), and the mirror signs that index. Upstream's keys are kept in keys/upstream/
with their checked fingerprints, for audit.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from email.utils import format_datetime
from pathlib import Path

import yaml

from gpufleet.mirror_apt import FetchedDeb, sha256_of
from gpufleet.mirror_targets import MirrorError, module_utils
from gpufleet.safe_files import refuse_link, write_atomically

MANIFEST = "manifest.json"
VARS_FILE = "mirror-vars.yml"
CUDA_DIR = "compute/cuda/repos"
OS_DIR = "os"
WHEEL_DIR = "wheels"
LOCK_FILE = "requirements.lock"  # under WHEEL_DIR: the pytorch role's hash lock (pytorch_mirror_lock_sha256)
KEY_ASC = "keys/gpufleet-mirror.asc"
KEY_GPG = "keys/gpufleet-mirror.gpg"
KEY_UID = "gpufleet mirror signing key <gpufleet-mirror@localhost>"


class Staging:
    """DEST is built beside itself under a hidden name and renamed into place at the end; a failed or
    interrupted build removes it, so no directory that looks complete is ever half-written."""

    def __init__(self, dest: Path, replace: bool):
        self.dest = Path(os.path.abspath(dest))
        if not self.dest.parent.is_dir():
            raise MirrorError(f"--dest {dest}: its parent directory {self.dest.parent} does not exist")
        if self.dest.exists() and not replace and (not self.dest.is_dir() or any(self.dest.iterdir())):
            raise MirrorError(f"--dest {dest} exists and is not empty; give a new directory, or --replace to "
                              "replace it once the new mirror is complete")
        if self.dest.exists() and replace:
            refuse_to_replace_a_non_mirror(self.dest, dest)
        self.path = self.dest.parent / f".{self.dest.name}.partial-{os.getpid()}"
        self.provenance: dict[str, dict] = {}
        self.committed = False

    def __enter__(self) -> "Staging":
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(mode=0o755)
        return self

    def __exit__(self, *exc) -> None:
        if not self.committed:
            shutil.rmtree(self.path, ignore_errors=True)

    def add(self, rel: str, src: Path | None = None, data: bytes | None = None, **origin) -> Path:
        """Place one file (copied from src, or data) at rel and note where it came from."""
        target = Path(os.path.normpath(self.path / rel))
        if os.path.isabs(rel) or not target.is_relative_to(self.path) or target == self.path:
            raise MirrorError(f"{rel!r} would be written outside the mirror ({self.dest}); nothing was written. "
                              "A file name from an index or repository must name a file inside it")
        target.parent.mkdir(parents=True, exist_ok=True)
        if src is not None:
            refuse_link(target)
            shutil.copyfile(src, target)
        else:
            write_atomically(target, data or b"")
        if origin:
            self.provenance[rel] = origin
        return target

    def commit(self) -> None:
        old = self.dest.parent / f".{self.dest.name}.old-{os.getpid()}"
        if self.dest.exists():
            os.rename(self.dest, old)
        os.rename(self.path, self.dest)
        self.committed = True
        shutil.rmtree(old, ignore_errors=True)


def refuse_to_replace_a_non_mirror(path: Path, given) -> None:
    """--replace deletes only what gpufleet mirror wrote (its manifest.json says so) or an empty directory."""
    if not path.is_dir() or path.is_symlink():
        raise MirrorError(f"--dest {given} is not a directory; --replace replaces only a gpufleet mirror")
    entries = sorted(path.iterdir())
    if not entries:
        return
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        is_mirror = isinstance(manifest, dict) and manifest.get("format") == 1 and "signing_key" in manifest \
            and isinstance(manifest.get("files"), list)
    except (OSError, ValueError):
        is_mirror = False
    if not is_mirror:
        shown = [entry.name + ("/" if entry.is_dir() else "") for entry in entries[:8]]
        more = f" and {len(entries) - 8} more" if len(entries) > 8 else ""
        raise MirrorError(f"--dest {given} is not a gpufleet mirror (no {MANIFEST} written by gpufleet mirror) and "
                          f"holds {', '.join(shown)}{more}; --replace would delete it. Give a new or empty directory, "
                          "or the directory of an earlier gpufleet mirror")


# ------------------------------------------------------------------------------------------------ keys

class Signer:
    """The mirror's signing key in its own GNUPGHOME (outside the served directory), made once and reused,
    so the fingerprint the inventory pins stays valid across rebuilds."""

    def __init__(self, home: Path):
        self.home = home
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        home.chmod(0o700)
        # Two first runs at once would each find no key and make one: the second waits here and takes the first's.
        with open(home / ".gpufleet-key.lock", "a+b") as lock:  # noqa: SIM115 (held for the block)
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            fingerprints = self._secret_fingerprints()
            if len(fingerprints) > 1:
                raise MirrorError(f"--key-dir {home} holds {len(fingerprints)} secret keys "
                                  f"({', '.join(fingerprints)}); it must hold exactly the mirror's one (or none, and "
                                  "one is made)")
            if not fingerprints:
                self.gpg("--passphrase", "", "--quick-gen-key", KEY_UID, "ed25519", "sign", "never")
                fingerprints = self._secret_fingerprints()
        self.fingerprint = fingerprints[0]

    def gpg(self, *args: str) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(self.home), *args],
                                  capture_output=True, check=False)
        except FileNotFoundError:
            raise MirrorError("gpg is not installed on this machine; the mirror's index is signed with it "
                              "(install gnupg)") from None
        finally:
            self._stop_agent()
        if proc.returncode != 0:
            raise MirrorError(f"gpg {' '.join(args[:2])} failed in {self.home}: {proc.stderr.decode(errors='replace').strip()}")
        return proc

    def _stop_agent(self, wait_s: float = 10.0) -> None:
        """No agent outlives a call. gpgconf --kill returns before the agent has gone, and a gpg started
        meanwhile connects to the dying agent's socket ("can't connect to the agent: End of file"), so the
        next call waits until the agent has removed its socket."""
        subprocess.run(["gpgconf", "--homedir", str(self.home), "--kill", "all"], capture_output=True, check=False)
        where = subprocess.run(["gpgconf", "--homedir", str(self.home), "--list-dirs", "agent-socket"],
                               capture_output=True, text=True, check=False).stdout.strip()
        socket = Path(where) if where else self.home / "S.gpg-agent"
        deadline = time.monotonic() + wait_s
        while socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _secret_fingerprints(self) -> list[str]:
        out = self.gpg("--with-colons", "--list-secret-keys").stdout.decode()
        return module_utils("pkg_repo").primary_key_fingerprints(out)

    def export(self, armor: bool) -> bytes:
        return self.gpg("--export", *(["--armor"] if armor else []), self.fingerprint).stdout

    def sign_release(self, release: Path) -> None:
        """InRelease (clear-signed) and Release.gpg (detached), as apt reads them."""
        common = ["--yes", "--local-user", self.fingerprint, "--digest-algo", "SHA256"]
        self.gpg(*common, "--clearsign", "--output", str(release.with_name("InRelease")), str(release))
        self.gpg(*common, "--armor", "--detach-sign", "--output", str(release.with_name("Release.gpg")), str(release))

    def detach_sign(self, path: Path) -> Path:
        out = path.with_name(path.name + ".asc")
        self.gpg("--yes", "--local-user", self.fingerprint, "--armor", "--detach-sign", "--output", str(out), str(path))
        return out


def download(url: str, timeout: int = 120) -> bytes:
    """One file over http(s) or file:; an error names the URL."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (operator-given repository URL)
            return response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise MirrorError(f"could not download {url}: {getattr(exc, 'reason', exc)}") from None


def checked_key(url: str, fingerprint: str, what: str) -> tuple[bytes, bytes]:
    """(the key file as published, a binary keyring of it) once it holds exactly the pinned key."""
    try:
        data = download(url)
    except MirrorError as exc:
        raise MirrorError(f"{exc}; the repository's signing key must be reachable from this machine: check {what}") from None
    with tempfile.TemporaryDirectory(prefix="gpufleet-mirror-key-") as home:
        os.chmod(home, 0o700)
        key = Path(home) / "key"
        key.write_bytes(data)
        shown = subprocess.run(["gpg", "--batch", "--homedir", home, "--with-colons", "--show-keys", str(key)],
                               capture_output=True, text=True, check=False)
        verdict = module_utils("pkg_repo").check_signing_key(shown.stdout if shown.returncode == 0 else "", fingerprint)
        if not verdict["ok"]:
            raise MirrorError(f"the signing key {url} was refused: {verdict['reason']}. Check {what}")
        if data.lstrip().startswith(b"-----BEGIN PGP"):
            dearmored = subprocess.run(["gpg", "--batch", "--homedir", home, "--dearmor"], input=data,
                                       capture_output=True, check=False)
            keyring = dearmored.stdout
        else:
            keyring = data
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True, check=False)
    return data, keyring


# -------------------------------------------------------------------------------------- apt repositories

def _packages_index(debs: list[FetchedDeb], filename_of) -> str:
    stanzas = []
    for deb in sorted(debs, key=lambda d: (d.name, d.version, d.arch)):
        stanzas.append(re.sub(r"(?m)^Filename: .*$", f"Filename: {filename_of(deb)}", deb.record))
    return "\n\n".join(stanzas) + "\n"


def _release(directory: Path, indexes: list[str], fields: dict) -> Path:
    """A Release file over the given index files (paths relative to directory)."""
    lines = [f"{key}: {value}" for key, value in fields.items() if value]
    lines.append("Date: " + format_datetime(datetime.now(timezone.utc), usegmt=True))
    for label, algorithm in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        lines.append(f"{label}:")
        for rel in indexes:
            data = (directory / rel).read_bytes()
            lines.append(f" {algorithm(data).hexdigest()} {len(data):>16} {rel}")
    release = directory / "Release"
    write_atomically(release, "\n".join(lines) + "\n")
    return release


def _write_index(directory: Path, text: str) -> list[str]:
    write_atomically(directory / "Packages", text)
    write_atomically(directory / "Packages.gz", gzip.compress(text.encode(), mtime=0))
    return ["Packages", "Packages.gz"]


def write_flat_repo(staging: Staging, rel: str, debs: list[FetchedDeb], signer: Signer, arch: str) -> None:
    """NVIDIA's layout: packages, Packages and a signed Release in one directory (`deb [...] URL /`)."""
    for deb in debs:
        staging.add(f"{rel}/{deb.filename}", src=deb.path, source=deb.uri, kind="deb", package=deb.name,
                    version=deb.version)
    directory = staging.path / rel
    indexes = _write_index(directory, _packages_index(debs, lambda d: f"./{d.filename}"))
    signer.sign_release(_release(directory, indexes, {"Origin": "gpufleet mirror", "Label": "gpufleet mirror",
                                                      "Architectures": arch, "Description": f"mirror of {rel}"}))


def write_archive_repo(staging: Staging, rel: str, suite: str, debs: list[FetchedDeb], signer: Signer,
                       arch: str) -> None:
    """A distribution-style repository (`deb [...] URL <suite> main`) for the OS packages."""
    for deb in debs:
        staging.add(f"{rel}/pool/main/{deb.filename}", src=deb.path, source=deb.uri, kind="deb",
                    package=deb.name, version=deb.version)
    dist = staging.path / rel / "dists" / suite
    binary = dist / "main" / f"binary-{arch}"
    binary.mkdir(parents=True, exist_ok=True)
    indexes = [f"main/binary-{arch}/{name}"
               for name in _write_index(binary, _packages_index(debs, lambda d: f"pool/main/{d.filename}"))]
    signer.sign_release(_release(dist, indexes, {"Origin": "gpufleet mirror", "Label": "gpufleet mirror",
                                                 "Suite": suite, "Codename": suite, "Architectures": arch,
                                                 "Components": "main"}))


# ------------------------------------------------------------------------------------ manifest and vars

def write_manifest(staging: Staging, meta: dict, signer: Signer) -> dict:
    """manifest.json: every file's path, SHA256, size and origin, and the date; signed beside it."""
    files = []
    for path in sorted(p for p in staging.path.rglob("*") if p.is_file()):
        rel = path.relative_to(staging.path).as_posix()
        origin = staging.provenance.get(rel, {"source": "generated by gpufleet mirror"})
        files.append({"path": rel, "sha256": sha256_of(path), "size": path.stat().st_size, **origin})
    document = {"format": 1, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **meta,
                "signing_key": signer.fingerprint, "files": files}
    manifest = staging.path / MANIFEST
    write_atomically(manifest, json.dumps(document, indent=2, sort_keys=False) + "\n")
    signer.detach_sign(manifest)
    return document


def mirror_vars(url: str, fingerprint: str, created: str, *, cuda: bool, wheels: bool, os_repos: dict,
                wheel_lock_sha256: str = "") -> str:
    """The inventory variables that point the stack roles at this mirror (YAML, commented)."""
    lines = [
        f"# gpufleet mirror, built {created} (manifest.json lists every file with its SHA256 and origin).",
        "# Put these in the inventory (e.g. group_vars/all/mirror.yml) and serve the mirror directory at",
        "# gpufleet_mirror_url; docs/mirror.md says how.",
        # Through the serializer: whatever the URL holds (" #", a newline, quotes), it loads back as exactly itself.
        yaml.safe_dump({"gpufleet_mirror_url": url or "http://MIRROR-HOST:PORT/PATH"}, default_flow_style=False,
                       width=float("inf"), allow_unicode=True).rstrip("\n")
        + ("" if url else "  # CHANGE ME: where the nodes reach the mirror directory"),
    ]
    if cuda:
        lines += ['gpufleet_cuda_repo_url: "{{ gpufleet_mirror_url }}/' + CUDA_DIR + '"',
                  'gpufleet_cuda_repo_key_url: "{{ gpufleet_mirror_url }}/' + KEY_ASC + '"',
                  f"gpufleet_cuda_repo_key_fingerprint: {fingerprint}"]
    if wheels:
        lines += ['gpufleet_pytorch_index_url: "{{ gpufleet_mirror_url }}/' + WHEEL_DIR + '/simple/"',
                  "# The index above, not a wheel directory on the nodes (copy wheels/ there and set this instead).",
                  'gpufleet_pytorch_wheel_dir: ""']
        lines += ([f"# The SHA256 of {WHEEL_DIR}/{LOCK_FILE}: the pytorch role installs these wheels by their hashes.",
                   f"gpufleet_pytorch_mirror_lock_sha256: {wheel_lock_sha256}"] if wheel_lock_sha256 else
                  [f"# No {WHEEL_DIR}/{LOCK_FILE} (see the build's warning): the pytorch role refuses these wheels unless",
                   "# gpufleet_pytorch_allow_unhashed: true"])
    if len(os_repos) == 1:
        (os_key, rel), = os_repos.items()
        lines += [f"# {os_key} packages the stack installs from the OS archive (dkms, headers, python3-venv, ...):",
                  "# point the nodes' OS sources at it, signed by " + KEY_GPG + ".",
                  'gpufleet_debian_mirror_url: "{{ gpufleet_mirror_url }}/' + rel + '"']
    for os_key, rel in sorted(os_repos.items()) if len(os_repos) > 1 else ():
        lines.append(f'# {os_key} nodes: gpufleet_debian_mirror_url: "{{{{ gpufleet_mirror_url }}}}/{rel}"')
    return "\n".join(lines) + "\n"


URL_HINT = "give where the nodes reach --dest, like http://HOST:PORT/PATH, https://HOST/PATH or file:///PATH"


def check_mirror_url(url: str) -> None:
    """--url is written into the inventory's variables and used by the nodes: an http(s) URL with a host, or a
    file: URL, with no whitespace or control character (a newline would add a YAML key, " #" would cut it)."""
    if any(char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise MirrorError(f"--url {url!r} holds whitespace or a control character; {URL_HINT} (quote a space as %20)")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https", "file"):
        raise MirrorError(f"--url {url!r} has scheme {parsed.scheme or 'none'!r}, not http, https or file; {URL_HINT}")
    if parsed.scheme != "file" and not parsed.hostname:
        raise MirrorError(f"--url {url!r} names no host; {URL_HINT}")
