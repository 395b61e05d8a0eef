# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What keeps a package at a version (dpkg holds, apt pins, dnf version locks), and whose it is.

Pure functions over text; the package_holds_info module reads the files and runs dpkg-query. Formats:

- ``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' NAME...``: the first letter of
  the status is the selection, ``h`` for hold (dpkg-query(1)).
- apt preferences (apt_preferences(5)): stanzas separated by blank lines, ``Package:`` (names, globs or
  ``/regex/``), ``Pin:`` (``version X`` with optional globs, ``release ...``, ``origin ...``), ``Pin-Priority:``.
- dnf versionlock.list: one ``[!]NAME-[EPOCH:]VERSION-RELEASE[.ARCH|.*]`` per line; ``!`` excludes.

A hold or pin is gpufleet's only at the version gpufleet recorded for it; anything else keeping a
package at another version than the plan's is an operator's, and moving it needs the operator's word.
"""

from __future__ import annotations

import fnmatch
import re

_VERSION_START = re.compile(r"^(\d+:)?\d")


def parse_dpkg_selections(stdout: str) -> dict:
    """``{name: {version, held}}`` for the installed (or held) packages dpkg-query listed."""
    found = {}
    for line in (stdout or "").splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0]:
            found[fields[0]] = {"version": fields[1].strip(), "held": fields[2].startswith("h")}
    return found


def _names_match(patterns: list, name: str) -> bool:
    for pattern in patterns:
        if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
            if re.search(pattern[1:-1], name):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def parse_apt_preferences(text: str, source: str) -> list:
    """The stanzas of one apt preferences file: ``{packages, pin, priority, source}``."""
    stanzas = []
    for block in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.lstrip().startswith("#"):
                fields[key.strip().lower()] = value.strip()
        if "package" in fields and "pin" in fields:
            try:
                priority = int(fields.get("pin-priority", "0"))
            except ValueError:
                priority = 0
            stanzas.append({"packages": fields["package"].split(), "pin": fields["pin"], "priority": priority,
                            "source": source})
    return stanzas


def parse_versionlock(text: str, names: list, source: str) -> list:
    """Version locks (and ``!`` exclusions) on the named packages: ``{package, kind, version, source}``."""
    locks = []
    for line in (text or "").splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        kind = "versionlock exclusion" if entry.startswith("!") else "versionlock"
        entry = entry.lstrip("!")
        for name in names:
            rest = entry[len(name) + 1:] if entry.startswith(name + "-") else ""
            if _VERSION_START.match(rest):
                version = re.sub(r"^\d+:", "", rest)
                version = re.sub(r"\.(\*|x86_64|aarch64|noarch|ppc64le)$", "", version)
                locks.append({"package": name, "kind": kind, "version": version, "source": source})
    return locks


def holds_on(names: list, selections: dict, pins: list, locks: list) -> list:
    """Everything that keeps one of ``names`` at a version: ``{package, kind, version, source}``."""
    found = []
    for name in names:
        if selections.get(name, {}).get("held"):
            found.append({"package": name, "kind": "dpkg hold", "version": selections[name]["version"],
                          "source": "dpkg selection"})
        for stanza in pins:
            if _names_match(stanza["packages"], name):
                kind, _sep, value = stanza["pin"].partition(" ")
                found.append({"package": name, "kind": "apt pin (%s, priority %d)" % (kind, stanza["priority"]),
                              "version": value.strip() if kind == "version" else "",
                              "blocks": stanza["priority"] < 0, "source": stanza["source"]})
    return found + [lock for lock in locks if lock["package"] in names]


def _keeps_elsewhere(hold: dict, planned: str) -> bool:
    """Whether a hold keeps its package off the planned version (a pin may use globs; a negative priority forbids it)."""
    if hold.get("blocks"):
        return True
    if not hold["version"]:
        return False
    if hold["kind"] == "versionlock exclusion":
        return fnmatch.fnmatchcase(planned, hold["version"])
    return not fnmatch.fnmatchcase(planned, hold["version"])


def foreign_holds(holds: list, planned: str, own: dict) -> list:
    """The holds that keep a package off ``planned`` and are not gpufleet's (``own``: {package: version} it set)."""
    return [hold for hold in holds
            if _keeps_elsewhere(hold, planned) and own.get(hold["package"]) != hold["version"]]


def own_pins(pins: list, names: list) -> dict:
    """``{package: version}`` the version pins in gpufleet's own preference files set."""
    own = {}
    for stanza in pins:
        kind, _sep, value = stanza["pin"].partition(" ")
        if kind == "version":
            for name in names:
                if _names_match(stanza["packages"], name):
                    own[name] = value.strip()
    return own


def describe(holds: list) -> str:
    """One line: each hold's package, kind, version and where it is set."""
    return "; ".join("%s %s%s (%s)" % (hold["package"], hold["kind"], " at " + hold["version"] if hold["version"] else "",
                                       hold["source"]) for hold in holds)
