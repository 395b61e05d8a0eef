# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/versions.py: versions compared by the rules of what installs them.

- ``left | gpufleet.cluster.compare_versions(right, scheme)``: -1, 0 or 1
- ``versions | gpufleet.cluster.newest_version(scheme)``: the newest, or "" for none
- ``requirements | gpufleet.cluster.unmet_pins(installed)``: the ``name==version`` pins the installed wheels miss (PEP 440)

``scheme`` is ``deb``, ``rpm``, ``pep440`` or ``dotted`` (driver and CUDA versions), or an OS family
(``Debian``, ``RedHat``) for the package rules that family installs by.
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions as _v


def _scheme(scheme) -> str:
    scheme = str(scheme or "")
    return scheme if scheme in _v.SCHEMES else _v.scheme_for(scheme)


def compare_versions(left, right, scheme):
    try:
        return _v.compare(left, right, _scheme(scheme))
    except _v.VersionError as exc:
        raise AnsibleFilterError(f"compare_versions({left!r}, {right!r}, {scheme!r}): {exc}") from None


def newest_version(candidates, scheme):
    if not isinstance(candidates, (list, tuple)):
        raise AnsibleFilterError(f"newest_version expects a list of versions, got {type(candidates).__name__}")
    try:
        return _v.newest([str(c) for c in candidates], _scheme(scheme)) or ""
    except _v.VersionError as exc:
        raise AnsibleFilterError(f"newest_version({scheme!r}): {exc}") from None


def unmet_pins(requirements, installed):
    if not isinstance(requirements, (list, tuple)) or not isinstance(installed, dict):
        raise AnsibleFilterError("unmet_pins expects a list of requirements and a dict of installed versions, got "
                                 f"{type(requirements).__name__} and {type(installed).__name__}")
    try:
        return _v.unmet_pins([str(r) for r in requirements], installed)
    except _v.VersionError as exc:
        raise AnsibleFilterError(f"unmet_pins: {exc}") from None


class FilterModule(object):
    def filters(self):
        return {"compare_versions": compare_versions, "newest_version": newest_version, "unmet_pins": unmet_pins}
