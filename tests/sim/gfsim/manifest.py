"""The sourced package manifests (tests/sim/manifests/*.yml), loaded and expanded.

A manifest says what one of NVIDIA's CUDA repositories holds: names, versions, relations and a
citation for each. The simulator builds its repositories from these files only, never from the
project's roles or solver, so a role that asks for a package NVIDIA does not ship fails here the
way it would fail on a real server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

MANIFEST_DIR = Path(__file__).resolve().parent.parent / "manifests"
PAYLOAD_KINDS = {"none", "userspace", "persistenced", "kmod", "fabricmanager", "imex", "nvlsm", "toolkit", "nccl",
                 "nccl-dev", "dcgm"}
RELATIONS = ("depends", "provides", "conflicts", "replaces")
FLAVOURS = ("proprietary", "open")


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    """One concrete package version as the repository serves it."""

    name: str
    version: str
    payload: dict
    source: tuple[str, ...]
    depends: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    unverified: str | None = None
    omitted: str | None = None
    driver: str | None = None          # the driver release a driver package belongs to

    @property
    def upstream(self) -> str:
        return self.version.split(":")[-1].split("-")[0]


@dataclass
class Manifest:
    repository: str
    path: str
    os: dict
    sources: dict[str, str]
    driver_releases: list[dict]
    entries: list[Entry]
    keyring: dict
    preinstall: dict[str, list[str]]
    preinstall_manual: dict[str, list[str]] = field(default_factory=dict)
    # The R590+ release names (releases flagged `unversioned`): NVIDIA's documented commands differ.
    preinstall_unversioned: dict[str, list[str]] = field(default_factory=dict)
    preinstall_manual_unversioned: dict[str, list[str]] = field(default_factory=dict)
    file: Path = field(default=Path())

    def versions(self, name: str) -> list[str]:
        return [e.version for e in self.entries if e.name == name]

    def names(self) -> set[str]:
        return {e.name for e in self.entries}

    def driver_upstreams(self) -> list[str]:
        return [r["upstream"] for r in self.driver_releases]

    def entry(self, name: str, version: str) -> Entry:
        for e in self.entries:
            if e.name == name and e.version == version:
                return e
        raise KeyError(f"{self.repository}: no {name}={version}")

    def _release(self, upstream: str) -> dict:
        for release in self.driver_releases:
            if str(release["upstream"]) == upstream:
                return release
        raise ManifestError(
            f"{self.repository}: NVIDIA's {self.repository} repository (manifest {self.file.name}) has no "
            f"driver {upstream}; it has: {', '.join(self.driver_upstreams())}")

    def _preinstall_sets(self, upstream: str) -> tuple[dict, dict]:
        """(names, manual names) per flavour for this release: the R590+ names where the release has them."""
        if self._release(upstream).get("unversioned") and self.preinstall_unversioned:
            return self.preinstall_unversioned, self.preinstall_manual_unversioned
        return self.preinstall, self.preinstall_manual

    def preinstall_pins(self, upstream: str, flavour: str) -> list[str]:
        """name=version for every package of the flavour's driver set at this release (a package of no
        release, such as a branch's pinning package, at its newest version)."""
        names, _manual = self._preinstall_sets(upstream)
        if flavour not in names:
            raise ManifestError(f"{self.repository}: unknown driver flavour {flavour!r}; known: {', '.join(names)}")
        branch = upstream.split(".", maxsplit=1)[0]
        pins = []
        for template in names[flavour]:
            name = template.format(branch=branch)
            match = ([e for e in self.entries if e.name == name and e.driver == upstream]
                     or sorted((e for e in self.entries if e.name == name and e.driver is None),
                               key=lambda e: e.version, reverse=True))
            if not match:
                raise ManifestError(f"{self.repository}: preinstall names {name}, which the manifest has not at {upstream}")
            pins.append(f"{name}={match[0].version}")
        return pins

    def preinstall_auto(self, upstream: str, flavour: str) -> list[str]:
        """The preinstalled packages a user would not have named (apt-mark auto)."""
        branch = upstream.split(".", maxsplit=1)[0]
        _names, manual_sets = self._preinstall_sets(upstream)
        manual = {t.format(branch=branch) for t in manual_sets.get(flavour, [])}
        return [p.split("=")[0] for p in self.preinstall_pins(upstream, flavour) if p.split("=")[0] not in manual]


def _as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _fill(value, **subst):
    if isinstance(value, str):
        return value.format(**subst)
    if isinstance(value, list):
        return [_fill(v, **subst) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, **subst) for k, v in value.items()}
    return value


def _entry(raw: dict, where: str, driver: str | None = None) -> Entry:
    for key in ("name", "version", "payload", "source"):
        if raw.get(key) in (None, "", []):
            raise ManifestError(f"{where}: entry {raw.get('name', '?')} has no {key}")
    payload = dict(raw["payload"])
    if payload.get("kind") not in PAYLOAD_KINDS:
        raise ManifestError(f"{where}: {raw['name']}: payload kind {payload.get('kind')!r}; known: {sorted(PAYLOAD_KINDS)}")
    if payload["kind"] == "kmod" and payload.get("flavour") not in FLAVOURS:
        raise ManifestError(f"{where}: {raw['name']}: kmod payload needs flavour open or proprietary")
    return Entry(name=str(raw["name"]), version=str(raw["version"]), payload=payload,
                 source=_as_tuple(raw["source"]), depends=_as_tuple(raw.get("depends")),
                 provides=_as_tuple(raw.get("provides")), conflicts=_as_tuple(raw.get("conflicts")),
                 replaces=_as_tuple(raw.get("replaces")), unverified=raw.get("unverified"),
                 omitted=raw.get("omitted"), driver=driver)


def load(path: Path) -> Manifest:
    data = yaml.safe_load(Path(path).read_text())
    where = Path(path).name
    sources = data.get("sources") or {}
    entries: list[Entry] = []
    for release in data.get("driver_releases") or []:
        upstream = str(release["upstream"])
        branch = upstream.split(".", maxsplit=1)[0]
        for template in data.get("driver_packages") or []:
            if template.get("when") and not release.get(template["when"]):
                continue
            raw = _fill({k: v for k, v in template.items() if k != "when"}, branch=branch, upstream=upstream)
            entries.append(_entry(raw, where, driver=upstream))
    for raw in data.get("packages") or []:
        entries.append(_entry(raw, where))
    manifest = Manifest(repository=data["repository"], path=data["path"], os=data["os"], sources=sources,
                        driver_releases=data.get("driver_releases") or [], entries=entries,
                        keyring=data["keyring"], preinstall=data.get("preinstall") or {},
                        preinstall_manual=data.get("preinstall_manual") or {},
                        preinstall_unversioned=data.get("preinstall_unversioned") or {},
                        preinstall_manual_unversioned=data.get("preinstall_manual_unversioned") or {}, file=Path(path))
    validate(manifest)
    return manifest


def validate(manifest: Manifest) -> None:
    """Every entry and release cites a known source; no package version appears twice."""
    where = manifest.file.name
    cited = [(f"driver release {r.get('upstream')}", r.get("source")) for r in manifest.driver_releases]
    cited += [(f"{e.name}={e.version}", e.source) for e in manifest.entries]
    cited.append(("keyring", manifest.keyring.get("source")))
    for what, keys in cited:
        if not keys:
            raise ManifestError(f"{where}: {what} has no source")
        unknown = [k for k in _as_tuple(keys) if k not in manifest.sources]
        if unknown:
            raise ManifestError(f"{where}: {what} cites unknown source(s) {unknown}; known: {sorted(manifest.sources)}")
    seen = set()
    for e in manifest.entries:
        if (e.name, e.version) in seen:
            raise ManifestError(f"{where}: {e.name}={e.version} is listed twice")
        seen.add((e.name, e.version))


def available() -> dict[str, Path]:
    """repository name (ubuntu2204, debian12, ...) -> manifest file."""
    return {p.stem: p for p in sorted(MANIFEST_DIR.glob("*.yml"))}


def load_all() -> dict[str, Manifest]:
    return {name: load(path) for name, path in available().items()}


# `simcluster.py up --os` values and the repository each uses.
OS_CHOICES = {"debian12": "debian12", "ubuntu22.04": "ubuntu2204", "ubuntu24.04": "ubuntu2404"}


def for_os(os_name: str) -> Manifest:
    if os_name not in OS_CHOICES:
        raise ManifestError(f"unknown --os {os_name!r}; known: {', '.join(OS_CHOICES)}")
    return load(available()[OS_CHOICES[os_name]])
