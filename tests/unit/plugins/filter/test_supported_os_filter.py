"""supported_os: the one supported-OS list (issue 37) in the forms preflight and the stack roles read."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter.supported_os import FilterModule, supported_os
from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_data import SUPPORTED_OS


def test_it_is_registered():
    assert FilterModule().filters() == {"supported_os": supported_os}


def test_ids_are_the_solvers_os_ids():
    assert supported_os("ids") == sorted(SUPPORTED_OS) == ["debian12", "rhel9", "ubuntu20.04", "ubuntu22.04", "ubuntu24.04"]


def test_platforms_are_what_the_roles_build_from_ansible_facts():
    assert supported_os("platforms") == ["Debian 12", "RedHat 9", "Rocky 9", "Ubuntu 20.04", "Ubuntu 22.04", "Ubuntu 24.04"]


def test_an_unknown_form_is_refused_naming_the_forms():
    with pytest.raises(AnsibleFilterError, match="ids, platforms"):
        supported_os("names")
