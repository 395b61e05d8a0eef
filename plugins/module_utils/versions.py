# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Versions compared by the rules of the tool that installs them.

PRIVATE to the gpufleet.cluster collection. Pure functions, no imports beyond the standard library,
so the same code runs in modules on a node (whose Python may lack ``packaging``) and in filters on
the controller.

- ``deb``: dpkg's ordering (Debian Policy 5.6.12, dpkg ``lib/dpkg/version.c``): ``[epoch:]upstream[-revision]``;
  in each part non-digit runs compare character by character with ``~`` before everything (even
  the end of the string), letters before other characters, then digit runs compare as numbers.
- ``rpm``: rpm's ``rpmvercmp`` (``rpmio/rpmvercmp.c``) on ``[epoch:]version[-release]``, with ``~``
  before everything and ``^`` after the base version; epochs compare as numbers, a release is
  compared only when both sides have one (``rpmverCmp``, ``lib/rpmver.c``).
- ``pep440``: wheel versions (PEP 440 / the packaging specification): epoch, release, pre-, post-
  and dev-release, local label; ``2.1.2+cu121`` sorts after ``2.1.2``.
- ``dotted``: NVIDIA driver and CUDA versions, numbers separated by dots (``535.104.05``).

Every ``compare`` returns -1, 0 or 1. A value the scheme cannot read raises :class:`VersionError`,
which names the value, the scheme and what a valid one looks like.
"""

from __future__ import annotations

import functools
import re

SCHEMES = ("deb", "rpm", "pep440", "dotted")
# The package rules each OS family installs by.
_FAMILY_SCHEMES = {"Debian": "deb", "RedHat": "rpm"}


class VersionError(ValueError):
    """A version string the named scheme cannot read."""


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def _refuse(version, scheme: str, why: str, example: str) -> VersionError:
    return VersionError(f"{version!r} is not a {scheme} version ({why}); a {scheme} version looks like {example}")


# --------------------------------------------------------------------------- #
# dpkg
# --------------------------------------------------------------------------- #

_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# What dpkg accepts in an upstream version and in a revision without a syntax complaint.
_DEB_UPSTREAM_CHARS = _DIGITS | _LETTERS | frozenset(".-+~:")
_DEB_REVISION_CHARS = _DIGITS | _LETTERS | frozenset(".+~")


def _deb_order(char: str) -> int:
    """dpkg's weight of one non-digit character; the end of the string weighs 0."""
    if not char or char in _DIGITS:
        return 0
    if char in _LETTERS:
        return ord(char)
    if char == "~":
        return -1
    return ord(char) + 256


def _deb_part_compare(left: str, right: str) -> int:
    """dpkg's verrevcmp on an upstream version or a revision."""
    i = j = 0
    while i < len(left) or j < len(right):
        while (i < len(left) and left[i] not in _DIGITS) or (j < len(right) and right[j] not in _DIGITS):
            a = _deb_order(left[i] if i < len(left) else "")
            b = _deb_order(right[j] if j < len(right) else "")
            if a != b:
                return _sign(a - b)
            i += 1
            j += 1
        start_i, start_j = i, j
        while i < len(left) and left[i] in _DIGITS:
            i += 1
        while j < len(right) and right[j] in _DIGITS:
            j += 1
        diff = int(left[start_i:i] or 0) - int(right[start_j:j] or 0)
        if diff:
            return _sign(diff)
    return 0


def _split_epoch(version, scheme: str, example: str) -> tuple:
    """``[epoch:]rest`` -> ``(epoch, rest)``: the epoch is everything before the first ``:``, 0 when absent."""
    text = str(version if version is not None else "").strip()
    if not text:
        raise _refuse(version, scheme, "it is empty", example)
    if ":" not in text:
        return 0, text
    head, rest = text.split(":", 1)
    if not head or not set(head) <= _DIGITS:
        raise _refuse(version, scheme, f"the epoch {head!r} is not a number", example)
    return int(head), rest


def parse_deb(version) -> tuple:
    """``[epoch:]upstream[-revision]`` -> ``(epoch, upstream, revision)`` as dpkg reads it.

    The epoch is everything before the first ``:``, the revision everything after the last ``-``
    (empty when there is none, which dpkg treats like ``0``).
    """
    example = '"1:2.0~rc1-1" or "535.104.05-0ubuntu1"'
    epoch, text = _split_epoch(version, "deb", example)
    upstream, sep, revision = text.rpartition("-") if "-" in text else (text, "", "")
    if not upstream:
        raise _refuse(version, "deb", "the upstream version is empty", example)
    if sep and not revision:
        raise _refuse(version, "deb", "the revision after the last '-' is empty", example)
    bad = sorted(set(upstream) - _DEB_UPSTREAM_CHARS) + sorted(set(revision) - _DEB_REVISION_CHARS)
    if bad:
        raise _refuse(version, "deb", f"it holds {''.join(bad)!r}, which dpkg does not accept there", example)
    return epoch, upstream, revision


def deb_compare(left, right) -> int:
    """``dpkg --compare-versions LEFT lt|eq|gt RIGHT`` as -1, 0, 1."""
    a, b = parse_deb(left), parse_deb(right)
    if a[0] != b[0]:
        return _sign(a[0] - b[0])
    return _deb_part_compare(a[1], b[1]) or _deb_part_compare(a[2], b[2])


# --------------------------------------------------------------------------- #
# rpm
# --------------------------------------------------------------------------- #

_RPM_SEGMENT = re.compile(r"[0-9]+|[A-Za-z]+")


def _rpm_alnum(char: str) -> bool:
    return char in _DIGITS or char in _LETTERS


def rpmvercmp(left: str, right: str) -> int:
    """rpm's ``rpmvercmp`` on one version or release string (no epoch)."""
    if left == right:
        return 0
    i = j = 0
    while i < len(left) or j < len(right):
        while i < len(left) and not _rpm_alnum(left[i]) and left[i] not in "~^":
            i += 1
        while j < len(right) and not _rpm_alnum(right[j]) and right[j] not in "~^":
            j += 1
        a = left[i] if i < len(left) else ""
        b = right[j] if j < len(right) else ""
        if "~" in (a, b):  # the tilde sorts before everything, even the end
            if a != "~":
                return 1
            if b != "~":
                return -1
            i, j = i + 1, j + 1
            continue
        if "^" in (a, b):  # the caret sorts after the end of the base version, before anything else
            if not a:
                return -1
            if not b:
                return 1
            if a != "^":
                return 1
            if b != "^":
                return -1
            i, j = i + 1, j + 1
            continue
        if not (a and b):
            break
        result = _rpm_segment_compare(left, right, i, j)
        if isinstance(result, int):
            return result
        i, j = result
    if i >= len(left) and j >= len(right):
        return 0
    return -1 if i >= len(left) else 1


def _rpm_segment_compare(left: str, right: str, i: int, j: int):
    """Compare the segments starting at i and j: -1/1, or the positions after both when equal."""
    numeric = left[i] in _DIGITS
    pattern = re.compile(r"[0-9]*" if numeric else r"[A-Za-z]*")
    one = pattern.match(left, i).group(0)
    two = pattern.match(right, j).group(0)
    if not two:  # numeric segments are newer than alpha ones
        return 1 if numeric else -1
    if numeric:
        one_digits, two_digits = one.lstrip("0"), two.lstrip("0")
        if len(one_digits) != len(two_digits):
            return 1 if len(one_digits) > len(two_digits) else -1
        one, two = one_digits, two_digits
    if one != two:
        return 1 if one > two else -1
    return i + len(pattern.match(left, i).group(0)), j + len(pattern.match(right, j).group(0))


def parse_rpm(version) -> tuple:
    """``[epoch:]version[-release]`` -> ``(epoch, version, release)``; epoch 0 and release None when absent."""
    example = '"3:535.104.05-1.el9" or "2.18.3-1+cuda12.2"'
    epoch, text = _split_epoch(version, "rpm", example)
    ver, sep, release = text.rpartition("-")
    if not sep:
        ver, release = text, None
    if not ver or any(c.isspace() for c in text):
        raise _refuse(version, "rpm", "the version is empty or holds a space", example)
    return epoch, ver, release


def rpm_compare(left, right) -> int:
    """rpm's order of two ``[epoch:]version[-release]`` strings as -1, 0, 1."""
    a, b = parse_rpm(left), parse_rpm(right)
    if a[0] != b[0]:
        return _sign(a[0] - b[0])
    result = rpmvercmp(a[1], b[1])
    if result or a[2] is None or b[2] is None:
        return result
    return rpmvercmp(a[2], b[2])


# --------------------------------------------------------------------------- #
# PEP 440
# --------------------------------------------------------------------------- #

# The specification's own pattern (packaging.python.org, "Version specifiers", appendix).
_PEP440 = re.compile(r"""
    ^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""", re.VERBOSE | re.IGNORECASE)
# Pre-release labels by rank; a dev release of a final version ranks before them all, a final one after.
_PRE_RANKS = {"alpha": 1, "a": 1, "beta": 2, "b": 2, "c": 3, "pre": 3, "preview": 3, "rc": 3}
_DEV_OF_FINAL, _FINAL = 0, 4


def _pep440_parts(version):
    match = _PEP440.match(str(version if version is not None else ""))
    if not match:
        raise _refuse(version, "pep440", "PEP 440 cannot read it", '"2.1.2", "2.4.0rc1" or "2.1.2+cu121"')
    return match


def pep440_key(version) -> tuple:
    """A sort key with PEP 440's order (the one ``packaging.version.Version`` implements)."""
    m = _pep440_parts(version)
    release = [int(part) for part in m.group("release").split(".")]
    while release and release[-1] == 0:  # 2.1 == 2.1.0
        release.pop()
    post = m.group("post_n1") or m.group("post_n2") or 0
    if m.group("pre"):
        pre = (_PRE_RANKS[m.group("pre_l").lower()], int(m.group("pre_n") or 0))
    elif m.group("dev") and not m.group("post"):
        pre = (_DEV_OF_FINAL, 0)
    else:
        pre = (_FINAL, 0)
    # No post-release sorts before post0; no dev release after every dev release; no local label before any.
    local = tuple((int(part), "") if set(part) <= _DIGITS else (-1, part.lower())
                  for part in re.split(r"[-_.]", m.group("local") or "") if part)
    return (int(m.group("epoch") or 0), tuple(release), pre,
            int(post) if m.group("post") else -1,
            int(m.group("dev_n") or 0) if m.group("dev") else float("inf"), local)


def pep440_compare(left, right) -> int:
    """PEP 440's order of two wheel versions as -1, 0, 1 (``2.1.2`` == ``2.1.2.0``; ``2.1.2+cu121`` > ``2.1.2``)."""
    a, b = pep440_key(left), pep440_key(right)
    return (a > b) - (a < b)


def _without_local(version) -> str:
    return str(version).split("+", 1)[0]


def pin_met(pinned, installed) -> bool:
    """Whether ``installed`` satisfies ``==pinned`` (PEP 440): ``==2.1.2`` accepts ``2.1.2+cu121``,
    ``==2.1.2+cu121`` only that build; ``1.26.04`` equals ``1.26.4``. Nothing installed meets no pin."""
    if installed is None or str(installed) == "":
        return False
    if "+" not in str(pinned):
        installed = _without_local(installed)
    return pep440_compare(pinned, installed) == 0


# A PEP 508 name, optional [extras], then the specifiers; markers and URLs are not read here.
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*(.*?)\s*$")


def canonical_name(name: str) -> str:
    """PEP 503's form of a distribution name: ``PyYAML``, ``pyyaml`` and ``py_yaml`` are one package."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def requirement_pin(requirement):
    """``requests[socks]==2.32.3`` -> ``("requests", "2.32.3")``; None for a requirement without an exact ``==`` pin."""
    match = _REQUIREMENT.match(str(requirement))
    if not match:
        raise VersionError(f"{requirement!r} is not a requirement such as \"numpy==1.26.4\" or \"requests[socks]==2.32.3\"")
    pins = [spec.strip()[2:].strip() for spec in match.group(2).split(",")
            if spec.strip().startswith("==") and not spec.strip().startswith("===")]
    if not pins:
        return None
    pep440_key(pins[0])
    return match.group(1), pins[0]


def unmet_pins(requirements, installed: dict) -> list:
    """The requirements whose exact ``==`` pin the installed versions (``{name: version or None}``) do not meet."""
    have = {canonical_name(name): version for name, version in (installed or {}).items()}
    out = []
    for requirement in requirements:
        pin = requirement_pin(requirement)
        if pin and not pin_met(pin[1], have.get(canonical_name(pin[0]))):
            out.append(requirement)
    return out


# --------------------------------------------------------------------------- #
# Dotted numbers (NVIDIA driver and CUDA versions)
# --------------------------------------------------------------------------- #

def dotted_key(version) -> tuple:
    """``535.104.05`` -> ``(535, 104, 5)``: a driver or CUDA version, numbers separated by dots."""
    text = str(version if version is not None else "").strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        raise _refuse(version, "dotted", "only numbers separated by dots", '"535.104.05" or "12.2"')
    return tuple(int(part) for part in text.split("."))


def dotted_compare(left, right) -> int:
    """Two driver or CUDA versions as -1, 0, 1; a missing trailing number counts as 0 (``12.2`` == ``12.2.0``)."""
    a, b = list(dotted_key(left)), list(dotted_key(right))
    width = max(len(a), len(b))
    a, b = a + [0] * (width - len(a)), b + [0] * (width - len(b))
    return (a > b) - (a < b)


# --------------------------------------------------------------------------- #
# By scheme
# --------------------------------------------------------------------------- #

_COMPARE = {"deb": deb_compare, "rpm": rpm_compare, "pep440": pep440_compare, "dotted": dotted_compare}
_READ = {"deb": parse_deb, "rpm": parse_rpm, "pep440": pep440_key, "dotted": dotted_key}


def scheme_for(os_family: str) -> str:
    """The package scheme an OS family installs by: ``Debian`` -> ``deb``, ``RedHat`` -> ``rpm``."""
    try:
        return _FAMILY_SCHEMES[os_family]
    except KeyError:
        raise VersionError(f"no package version rules are known for the OS family {os_family!r}; "
                           f"known: {', '.join(sorted(_FAMILY_SCHEMES))}") from None


def compare(left, right, scheme: str) -> int:
    """``left`` against ``right`` by ``scheme`` (one of :data:`SCHEMES`): -1, 0 or 1."""
    try:
        return _COMPARE[scheme](left, right)
    except KeyError:
        raise VersionError(f"unknown version scheme {scheme!r}; use one of {', '.join(SCHEMES)}") from None


def sort_key(scheme: str):
    """A ``key=`` for sorted()/max() that orders versions by ``scheme``."""
    if scheme not in _COMPARE:
        raise VersionError(f"unknown version scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    return functools.cmp_to_key(_COMPARE[scheme])


def newest(versions, scheme: str):
    """The newest of ``versions`` by ``scheme``; None for none. Every one must be readable, even a lone one."""
    key = sort_key(scheme)
    versions = list(versions)
    for version in versions:
        _READ[scheme](version)
    return max(versions, key=key) if versions else None
