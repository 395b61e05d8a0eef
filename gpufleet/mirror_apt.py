# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The host's own apt-get over a private state: resolve what a node installs, download it, check it.

Nothing of the host's apt configuration is read (APT_CONFIG names an empty configuration directory and
no main file), nothing is trusted but the keyrings given per source (`signed-by`), and the package
state the resolution starts from is the node's (or an empty one). apt checks every file against the
repository's signed index while it downloads; `fetch` checks each file's SHA256 and size against
that index once more, and keeps the index record, so the mirror's own index says what upstream said.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from gpufleet import children
from gpufleet.mirror_targets import MirrorError, module_utils

DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "sbsa": "arm64", "ppc64le": "ppc64el"}
_URI_LINE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+) (?P<hash>\S*)$")


@dataclass(frozen=True)
class AptSource:
    """One `deb` line: a flat repository (suite "./"-style, no components) or an archive suite."""

    uri: str
    suite: str
    components: tuple[str, ...]
    keyring: Path

    def line(self) -> str:
        suite = self.suite or "/"
        return f"deb [signed-by={self.keyring}] {self.uri} {suite} {' '.join(self.components)}".rstrip() + "\n"

    def holds(self, uri: str) -> bool:
        return uri.startswith(self.uri.rstrip("/") + "/")


@dataclass(frozen=True)
class FetchedDeb:
    """A downloaded package, checked against the signed index it came from."""

    path: Path
    name: str
    version: str
    arch: str
    uri: str
    sha256: str
    size: int
    record: str  # the index record (Packages stanza) upstream published for it

    @property
    def filename(self) -> str:
        """The file's name as the repository stores it (no URL quoting)."""
        return urllib.parse.unquote(self.uri.rsplit("/", 1)[-1])


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def parse_records(text: str) -> list[dict]:
    """Debian control stanzas -> [{field: value, "_text": stanza}] (continuation lines kept in the text)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        if not stanza.strip():
            continue
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _sep, value = line.partition(":")
                fields[key] = value.strip()
        fields["_text"] = stanza.strip("\n")
        out.append(fields)
    return out


def parse_print_uris(text: str) -> list[dict]:
    """`apt-get install --print-uris -qq` lines: 'URI' file size hash."""
    return [m.groupdict() for m in (_URI_LINE.match(line.strip()) for line in text.splitlines()) if m]


def apt_problem(output: str) -> str:
    """apt's own explanation on one line: its E:/W:/Err: lines and the unmet-dependency block, without boilerplate."""
    keep, continues = [], False
    for line in output.splitlines():
        text, stripped = line.rstrip(), line.strip()
        if text.startswith(("E:", "W:", "Err:")) or re.match(r"^ \S+ : ", text):
            keep.append(stripped)
            continues = not text.startswith(("E:", "W:"))
        elif continues and text.startswith("  ") and stripped:
            keep.append(stripped)
        else:
            continues = False
    return " | ".join(keep)[:3000] or output.strip()[-1500:]


class AptSandbox:
    """apt-get and apt-cache over a private root: configuration, sources, keys, lists, cache, dpkg status."""

    def __init__(self, root: Path, arch: str, sources: list[AptSource], preferences: str = "",
                 status: bytes = b"", recommends: bool = True):
        if not shutil.which("apt-get"):
            raise MirrorError("apt-get is not available on this machine: a plan for an apt OS (Debian, Ubuntu) is "
                              "mirrored with the host's apt-get; run gpufleet mirror on a Debian or Ubuntu machine")
        self.root = root
        self.arch = DEB_ARCH.get(arch, arch)
        self.sources = sources
        for sub in ("etc/apt.conf.d", "etc/sources.list.d", "etc/preferences.d", "etc/trusted.gpg.d",
                    "state/lists/partial", "cache/archives/partial", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "etc/sources.list").write_text("".join(s.line() for s in sources))
        (root / "etc/preferences").write_text(preferences)
        (root / "status").write_bytes(status)
        (root / "apt.conf").write_text(self._config(recommends))

    def _config(self, recommends: bool) -> str:
        r = self.root
        lines = {
            "Dir::Etc::Parts": f"{r}/etc/apt.conf.d", "Dir::Etc::Main": "/dev/null",
            "Dir::Etc::SourceList": f"{r}/etc/sources.list", "Dir::Etc::SourceParts": f"{r}/etc/sources.list.d",
            "Dir::Etc::Preferences": f"{r}/etc/preferences", "Dir::Etc::PreferencesParts": f"{r}/etc/preferences.d",
            "Dir::Etc::Trusted": f"{r}/etc/trusted.gpg", "Dir::Etc::TrustedParts": f"{r}/etc/trusted.gpg.d",
            "Dir::State": f"{r}/state", "Dir::State::status": f"{r}/status", "Dir::Cache": f"{r}/cache",
            "Dir::Log": f"{r}/log", "APT::Architecture": self.arch, "Debug::NoLocking": "true",
            "APT::Get::List-Cleanup": "false", "Acquire::Languages": "none",
            "APT::Install-Recommends": "true" if recommends else "false",
        }
        text = "".join(f'{key} "{value}";\n' for key, value in lines.items())
        text += f'APT::Architectures {{ "{self.arch}"; }};\n'
        if os.geteuid() == 0:  # apt drops to _apt, which cannot write this private cache
            text += 'APT::Sandbox::User "root";\n'
        return text

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("APT_")}
        env.update(APT_CONFIG=str(self.root / "apt.conf"), LC_ALL="C", DEBIAN_FRONTEND="noninteractive")
        return children.run([tool, *args], capture_output=True, text=True, env=env, check=False)

    def update(self) -> None:
        """Read every source's signed index; a source that cannot be read or verified is an error naming it."""
        proc = self.run("apt-get", "update")
        output = proc.stdout + proc.stderr
        # apt-get update exits 0 when a source fails ("W: Failed to fetch ..."); its Err: lines name the source.
        failed = [s for s in self.sources
                  if re.search(r"^(Err:\S*|.*Failed to fetch) " + re.escape(s.uri.rstrip("/")), output, re.M)]
        if proc.returncode != 0 or failed or re.search(r"NO_PUBKEY|BADSIG|EXPKEYSIG|is not signed|GPG error", output):
            where = ", ".join(f"{s.uri} {s.suite or '/'}" for s in failed) or ", ".join(s.uri for s in self.sources)
            raise MirrorError(f"apt could not read the repository {where} (rc {proc.returncode}): "
                              f"{apt_problem(output)}. Check that the URL is reachable from this machine and "
                              "signed by the key given for it")

    def offered(self, names: list[str]) -> dict:
        """{name: [versions]} the sources offer, as the driver role's repository check reads them."""
        pkg_repo = module_utils("pkg_repo")
        proc = self.run("apt-cache", "policy", *names)
        return pkg_repo.apt_offered(pkg_repo.parse_apt_policy(proc.stdout))

    def all_names(self) -> list[str]:
        return self.run("apt-cache", "pkgnames").stdout.split()

    def records(self, pins: list[str]) -> list[dict]:
        proc = self.run("apt-cache", "show", "--no-all-versions", *pins)
        return [r for r in parse_records(proc.stdout) if "Filename" in r]

    def fetch(self, install: list[str]) -> list[FetchedDeb]:
        """Resolve `apt-get install <install>` against the node's state, download what it would install,
        and check each file against its index record."""
        args = ["install", "-y", "-q", "--allow-downgrades", "--allow-change-held-packages", *install]
        listing = self.run("apt-get", *args, "--print-uris")  # -q, not -qq: -qq hides the unmet dependencies
        if listing.returncode != 0:
            raise MirrorError(f"apt cannot install {' '.join(install)} from {self._where()}: "
                              f"{apt_problem(listing.stdout + listing.stderr)}")
        wanted = parse_print_uris(listing.stdout)
        if not wanted:
            return []
        download = self.run("apt-get", *args, "--download-only")
        if download.returncode != 0:
            output = download.stdout + download.stderr
            bad = re.findall(r"Failed to fetch (\S+)\s+(Hash Sum mismatch|File has unexpected size \([^)]*\))", output)
            if bad:
                sums = re.findall(r"- SHA256:(\w+)", output)
                said = (f": the signed index says SHA256 {sums[0]}, the file served has {sums[1]}" if len(sums) > 1
                        else f": {bad[0][1]}")
                raise MirrorError(f"checksum mismatch: {', '.join(url for url, _why in bad)}{said}; the repository "
                                  "or a proxy serves stale or altered files. Nothing was mirrored")
            raise MirrorError(f"apt could not download {' '.join(install)}: {apt_problem(output)}")
        return [self._checked(item) for item in wanted]

    def _where(self) -> str:
        return ", ".join(f"{s.uri} {s.suite or '/'}" for s in self.sources)

    def _checked(self, item: dict) -> FetchedDeb:
        uri = item["uri"]
        path = self.root / "cache/archives" / item["file"]
        if uri.startswith("file:") and not path.exists():
            path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))  # apt reads file: sources in place
        control = self.run("dpkg-deb", "--field", str(path), "Package", "Version", "Architecture")
        fields = {r.partition(":")[0]: r.partition(":")[2].strip() for r in control.stdout.splitlines()}
        if control.returncode != 0 or "Package" not in fields:
            raise MirrorError(f"{uri}: not a Debian package ({control.stderr.strip() or 'dpkg-deb read nothing'})")
        name, version, arch = fields["Package"], fields["Version"], fields["Architecture"]
        digest, size = sha256_of(path), path.stat().st_size
        records = [r for r in self.records([f"{name}={version}"]) if r.get("Architecture") == arch]
        record = next((r for r in records if r.get("SHA256") == digest), None)
        if record is None:
            index = ", ".join(f"SHA256 {r.get('SHA256', 'none')} size {r.get('Size')}" for r in records) or "no record"
            raise MirrorError(f"checksum mismatch: {name} {version} ({arch}) from {uri} has SHA256 {digest} and size "
                              f"{size}; the repository's signed index says {index}. Nothing from it is mirrored")
        if int(record.get("Size", size)) != size:
            raise MirrorError(f"size mismatch: {name} {version} from {uri} is {size} bytes; the index says {record['Size']}")
        return FetchedDeb(path, name, version, arch, uri, digest, size, record["_text"])


def driver_preferences(template: Path, upstream: str) -> str:
    """The driver role's apt pin (every driver component at the planned release), rendered from its template,
    so apt resolves the metapackages' `>=` dependencies here exactly as on the node."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "\n".join("# " + line for line in str(text).splitlines())
    return env.from_string(template.read_text()).render(
        ansible_managed="gpufleet mirror: the nvidia_driver role's pin", __nvidia_driver_target={"upstream": upstream})


def check_requests(sandbox: AptSandbox, requests: list[dict]) -> dict:
    """The driver role's repository check, here: {name: version to install}; a clear error for what is missing."""
    pkg_repo = module_utils("pkg_repo")
    names = [r["name"] for r in requests]
    result = pkg_repo.check_requests(requests, sandbox.offered(names), sandbox.all_names(), scheme="deb")
    if not result["ok"]:
        raise MirrorError(f"the repository {sandbox._where()} cannot serve the plan: {result['message']}")
    return result["resolved"]
