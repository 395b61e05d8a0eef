# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""What a package repository offers, read from apt-cache / dnf output, and whether a plan fits it.

Pure functions over text: the repo_packages_info module runs the commands, the role and the tests
feed the same parsers. Formats (real captures in tests/fixtures/repo/, sources in SOURCES.md):

- ``apt-cache policy NAME...``: one block per known name (``name:``, ``Installed:``, ``Candidate:``,
  ``Version table:``, then version lines with a priority, ``***`` marking the installed one, each
  followed by its sources). A name apt does not know prints nothing at all.
- ``dnf list --showduplicates NAME...``: ``Installed Packages`` / ``Available Packages`` sections of
  ``name.arch  [epoch:]version-release  repo`` rows (long names wrap the rest onto the next line).
- ``dnf module list MODULE``: a table of ``name  stream [flags]  profiles  summary`` rows, one
  table per repository.
- ``gpg --batch --with-colons --show-keys FILE``: ``pub`` records (validity, expiry), each followed by its ``fpr``.
"""

from __future__ import annotations

import re
import time

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions

_APT_VERSION_LINE = re.compile(r"^\s*(\*\*\*\s+)?(\S+)\s+(-?\d+)\s*$")
_DNF_ROW = re.compile(r"^(\S+)\.(\w+)\s+(\S+)\s+(\S+)\s*$")
_DNF_SECTIONS = {"Installed Packages": "installed", "Available Packages": "available"}
_DNF_NOISE = re.compile(r"^(Last metadata expiration check|Updating Subscription|Error:|Extra Packages|Obsoleting)")
_MODULE_FLAG = re.compile(r"\s*\[[a-z]\]")


def upstream_version(version: str) -> str:
    """The upstream part of a package version: no epoch, no package release.

    ``1:535.104.05-0ubuntu1`` -> ``535.104.05``; ``3:535.104.05-1.el9`` -> ``535.104.05``.
    """
    text = (version or "").strip()
    if re.match(r"^\d+:", text):
        text = text.split(":", 1)[1]
    return text.rsplit("-", 1)[0] if "-" in text else text


def parse_apt_policy(text: str) -> dict:
    """``apt-cache policy`` output -> ``{name: {installed, candidate, versions}}``.

    ``installed`` and ``candidate`` are None for ``(none)`` or when the lines are absent;
    ``versions`` lists every version of the version table, newest first as apt prints them, the
    installed one included even when only ``/var/lib/dpkg/status`` holds it.
    """
    packages: dict = {}
    current = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if not line.startswith(" ") and line.endswith(":"):
            current = {"installed": None, "candidate": None, "versions": [], "sources": {}}
            packages[line[:-1]] = current
            continue
        if current is None:
            continue
        stripped = line.strip()
        for label in ("Installed", "Candidate"):
            if stripped.startswith(label + ":"):
                value = stripped.split(":", 1)[1].strip()
                current[label.lower()] = None if value in ("", "(none)") else value
                break
        else:
            if stripped == "Version table:":
                continue
            match = _APT_VERSION_LINE.match(line)
            # A version line sits at indent 5 (or ' *** '); a source line is indented further and ends in a word.
            if match and (match.group(1) or len(line) - len(line.lstrip()) <= 5):
                version = match.group(2)
                if version not in current["versions"]:
                    current["versions"].append(version)
                current["_last"] = version
                continue
            last = current.get("_last")
            if last:
                source = re.sub(r"^\d+\s+", "", stripped)
                current["sources"].setdefault(last, []).append(source)
    for entry in packages.values():
        entry.pop("_last", None)
        # An installed version that no repository offers any more is still only in dpkg's status file.
        entry["repository_versions"] = [
            v for v in entry["versions"]
            if any(not s.startswith("/var/lib/dpkg/status") for s in entry["sources"].get(v, ["?"]))
        ]
    return packages


def parse_dnf_list(text: str) -> dict:
    """``dnf list [--showduplicates]`` output -> ``{name: {installed: [...], available: [...], arch}}``."""
    packages: dict = {}
    section = None
    pending = ""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line in _DNF_SECTIONS:
            section = _DNF_SECTIONS[line]
            pending = ""
            continue
        if section is None or _DNF_NOISE.match(line):
            continue
        # dnf wraps a long name.arch onto its own line and prints version and repo on the next.
        candidate = (pending + " " + line).strip() if pending else line
        match = _DNF_ROW.match(candidate)
        if not match:
            pending = candidate if len(candidate.split()) < 3 else ""
            continue
        pending = ""
        name, arch, version, _repo = match.groups()
        entry = packages.setdefault(name, {"installed": [], "available": [], "arch": arch})
        if version not in entry[section]:
            entry[section].append(version)
    return packages


def parse_dnf_module_list(text: str) -> dict:
    """``dnf module list`` output -> ``{module: [streams]}`` (flags such as ``[d]`` ``[e]`` removed)."""
    modules: dict = {}
    in_table = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if line.startswith("Name") and "Stream" in line:
            in_table = True
            continue
        if not in_table or not line.strip():
            continue
        if line.startswith("Hint:"):
            break
        fields = _MODULE_FLAG.sub("", line).split()
        if len(fields) < 2 or fields[1].endswith(","):
            continue
        streams = modules.setdefault(fields[0], [])
        if fields[1] not in streams:
            streams.append(fields[1])
    return modules


def primary_keys(colons: str) -> list:
    """The primary keys in ``gpg --with-colons --show-keys`` output, in file order.

    Each is ``{fingerprint, validity, expires}``: ``validity`` is the ``pub`` record's second field
    (``r`` revoked, ``e`` expired, ``d``/``D`` disabled), ``expires`` its seventh (seconds since the
    epoch, 0 when the key never expires). Subkey fingerprints (the ``fpr`` after a ``sub`` record)
    are not primary keys and are left out.
    """
    out = []
    current = None
    for line in (colons or "").splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sec"):
            current = {"validity": fields[1] if len(fields) > 1 else "",
                       "expires": int(fields[6]) if len(fields) > 6 and fields[6].isdigit() else 0,
                       "disabled": len(fields) > 11 and "D" in fields[11]}
        elif fields[0] in ("sub", "ssb"):
            current = None
        elif fields[0] == "fpr" and current is not None and len(fields) > 9:
            out.append({"fingerprint": fields[9].upper(), **current})
            current = None
    return out


def primary_key_fingerprints(colons: str) -> list:
    """Fingerprints of the primary keys in ``gpg --with-colons --show-keys`` output, in file order."""
    return [key["fingerprint"] for key in primary_keys(colons)]


def _unusable(key: dict, now: float) -> str:
    """Why a primary key must not be trusted for signatures (revoked, expired, disabled); empty when usable."""
    if key["validity"] == "r":
        return "it is revoked (the file carries its revocation)"
    if key["expires"] and key["expires"] <= now:
        return "it expired on %s" % time.strftime("%Y-%m-%d", time.gmtime(key["expires"]))
    if key["validity"] == "e":
        return "it is expired"
    if key["disabled"] or key["validity"] in ("d", "D"):
        return "it is disabled"
    return ""


def check_signing_key(colons: str, pinned: str, now: float | None = None) -> dict:
    """Judge a downloaded signing key file: exactly one primary key, the pinned one, neither revoked nor expired.

    ``now`` (seconds since the epoch) is when the key must still be valid; the current time by default.
    """
    want = re.sub(r"\s+", "", pinned or "").upper()
    keys = primary_keys(colons)
    found = [key["fingerprint"] for key in keys]
    if not want:
        return {"ok": False, "fingerprints": found, "reason": "no pinned fingerprint was given"}
    if not found:
        return {"ok": False, "fingerprints": found, "reason": "the file holds no OpenPGP public key"}
    if len(found) > 1:
        return {"ok": False, "fingerprints": found,
                "reason": f"the file holds {len(found)} primary keys ({', '.join(found)}); exactly one, {want}, is accepted"}
    if found[0] != want:
        return {"ok": False, "fingerprints": found,
                "reason": f"its key is {found[0]}, which is not the pinned key; the pin is {want}"}
    problem = _unusable(keys[0], time.time() if now is None else now)
    if problem:
        return {"ok": False, "fingerprints": found,
                "reason": f"the pinned key {want} is in the file but {problem}: a repository signed with it cannot be "
                          "trusted. Get the repository's current key and pin its fingerprint"}
    return {"ok": True, "fingerprints": found, "reason": ""}


def same_prefix_candidates(name: str, names, limit: int = 12) -> list:
    """Names that share the longest dash-separated prefix with ``name`` (what the repository has instead)."""
    pool = sorted({n for n in names if n and n != name})
    if name.startswith("@"):
        # A module stream: the other streams of the same module.
        module = name.split(":", 1)[0] + ":"
        return [n for n in pool if n.startswith(module)][:limit]
    parts = name.split("-")
    for keep in range(len(parts) - 1, 0, -1):
        prefix = "-".join(parts[:keep])
        hits = [n for n in pool if n == prefix or n.startswith(prefix + "-")]
        if hits:
            return hits[:limit]
    return []


def _newest(found: list, scheme: str) -> str:
    """The newest of the repository's versions by the package manager's rules; a module stream has none ("")."""
    real = [v for v in found if v]
    return versions.newest(real, scheme) if real else ""


def resolve_request(request: dict, offered: dict, all_names=(), *, scheme: str) -> dict:
    """One planned package against what the repository offers.

    ``request``: ``{name, version, match}`` with ``match`` one of ``upstream`` (the version's upstream
    part equals ``version``), ``exact`` (the full version string equals it) or ``any``.
    ``offered``: ``{name: [versions]}``; ``scheme``: ``deb`` (apt) or ``rpm`` (dnf), the rules that pick
    the newest of several matches. Returns ``{name, wanted, found, version, offered, candidates, problem}``
    where ``version`` is the repository's full version string to install.
    """
    name = request["name"]
    wanted = request.get("version") or ""
    match = request.get("match") or ("upstream" if wanted else "any")
    result = {"name": name, "wanted": wanted, "match": match, "found": False, "version": "",
              "offered": [], "candidates": [], "problem": ""}
    if name not in offered:
        result["candidates"] = same_prefix_candidates(name, all_names)
        result["problem"] = (f"{name} is not in the repository; it offers "
                             + (", ".join(result["candidates"]) if result["candidates"] else "no package of that prefix"))
        return result
    available = list(offered[name])
    result["offered"] = available
    if match == "any":
        hits = available
    elif match == "exact":
        hits = [v for v in available if v == wanted or re.sub(r"^\d+:", "", v) == wanted]
    else:
        hits = [v for v in available if upstream_version(v) == wanted]
    if not hits:
        shown = sorted({upstream_version(v) if match == "upstream" else v for v in available if v},
                       key=versions.sort_key(scheme), reverse=True)
        result["problem"] = (f"{name} {wanted} is not in the repository; it offers {name} "
                             + (", ".join(shown) if shown else "in no version"))
        return result
    result["found"] = True
    result["version"] = _newest(hits, scheme) if match != "exact" else hits[0]
    return result


def check_requests(requests, offered: dict, all_names=(), *, scheme: str) -> dict:
    """Every planned package against the repository (``scheme``: ``deb`` or ``rpm``): ``{ok, packages, missing, message}``."""
    results = [resolve_request(r, offered, all_names, scheme=scheme) for r in requests]
    missing = [r for r in results if not r["found"]]
    return {"ok": not missing, "packages": results, "missing": missing,
            "resolved": {r["name"]: r["version"] for r in results if r["found"]},
            "message": "; ".join(r["problem"] for r in missing)}


def apt_offered(policy: dict) -> dict:
    """Versions the configured apt sources offer, per name, from parse_apt_policy()."""
    return {name: entry["repository_versions"] for name, entry in policy.items() if entry["repository_versions"]}


def dnf_offered(listing: dict, modules: dict | None = None) -> dict:
    """Versions dnf can install, per name; module streams appear as ``@module:stream`` with no version."""
    out = {name: entry["available"] + [v for v in entry["installed"] if v not in entry["available"]]
           for name, entry in listing.items()}
    for module, streams in (modules or {}).items():
        for stream in streams:
            out[f"@{module}:{stream}"] = [""]
    return out
