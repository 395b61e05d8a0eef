# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""``'ids' | gpufleet.cluster.supported_os``: the one list of supported operating systems (issue 37).

The solver plans, preflight checks and the stack roles accept the same OSes: each reads this list
(compat_packages SUPPORTED_OS) instead of a list of its own.
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_data import SUPPORTED_OS

FORMS = ("ids", "platforms")


def supported_os(form="ids"):
    """``ids``: the OS ids (ubuntu22.04, rhel9, ...) the solver plans; ``platforms``: the same OSes as the
    roles read Ansible's facts, "<distribution> <version>" (Ubuntu by full version, others by major)."""
    if form == "ids":
        return sorted(SUPPORTED_OS)
    if form == "platforms":
        return [platform for _os_id, row in sorted(SUPPORTED_OS.items()) for platform in row["ansible"]]
    raise AnsibleFilterError("supported_os: the form must be one of %s, not %r" % (", ".join(FORMS), form))


class FilterModule(object):
    def filters(self):
        return {"supported_os": supported_os}
