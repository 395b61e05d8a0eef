"""The one list of supported operating systems (issue 37): compat_packages SUPPORTED_OS.

Every OS the solver plans is a row of the list, every row carries its package manager, default python3,
NVIDIA repository and the source that says NVIDIA supports it, and an OS outside the list (RHEL 8, whose
python3 3.6 ansible-core 2.17+ cannot run; repositories the stack roles do not handle) is refused at plan
time with the list. The stack roles' side is tests/unit/roles/test_supported_os_roles.py.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve

REQUEST = {"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.6", "torch": "2.4.1"}


def test_every_row_names_what_the_parts_need():
    assert set(data.SUPPORTED_OS) == {"ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "debian12", "rhel9"}
    for os_id, row in data.SUPPORTED_OS.items():
        assert row["package_manager"] in ("apt", "dnf"), os_id
        assert row["os_family"] in ("Debian", "RedHat"), os_id
        assert row["python"] == data.OS_PYTHON[os_id]["python"], os_id
        assert row["repository"] == data.REPO_DISTROS[os_id][0], os_id
        assert data.REPO_DISTROS[os_id][1] == row["package_manager"], os_id
        assert "Installation Guide" in row["source"] and "read 20" in row["source"], os_id
        assert row["ansible"] and row["name"], os_id


def test_refused_and_supported_do_not_overlap_and_every_repository_is_one_or_the_other():
    assert not set(data.SUPPORTED_OS) & set(data.REFUSED_OS)
    assert set(data.SUPPORTED_OS) | set(data.REFUSED_OS) == set(data.REPO_DISTROS)
    assert "python" in data.REFUSED_OS["rhel8"]["reason"] and "3.6" in data.REFUSED_OS["rhel8"]["reason"]


@pytest.mark.parametrize("os_id", sorted(data.SUPPORTED_OS))
def test_every_supported_os_is_planned(os_id):
    plan = solve(dict(REQUEST, os=os_id))
    assert plan["os"] == os_id


@pytest.mark.parametrize("os_in", ["rocky9", "Rocky Linux 9.3", "ubuntu2204", "debian 12"])
def test_names_of_a_supported_os_are_planned(os_in):
    assert solve(dict(REQUEST, os=os_in))["os"] in data.SUPPORTED_OS


@pytest.mark.parametrize("os_id", sorted(data.REFUSED_OS))
def test_an_os_with_a_repository_but_outside_the_list_is_refused_with_its_reason_and_the_list(os_id):
    with pytest.raises(StackError) as err:
        solve(dict(REQUEST, os=os_id))
    assert err.value.rule == "UNSUPPORTED_OS"
    text = str(err.value)
    assert "[UNSUPPORTED_OS]" in text and data.REFUSED_OS[os_id]["reason"] in text
    for supported in data.SUPPORTED_OS:
        assert supported in text
    assert {alt["os"] for alt in err.value.alternatives} <= set(data.SUPPORTED_OS)


def test_rocky_8_is_refused_for_its_python():
    with pytest.raises(StackError) as err:
        solve(dict(REQUEST, os="rocky8"))
    assert "3.6" in str(err.value) and "ansible_python_interpreter" in str(err.value)


def test_an_unknown_os_is_refused_with_the_list():
    with pytest.raises(StackError) as err:
        solve(dict(REQUEST, os="sles15"))
    assert err.value.rule == "UNSUPPORTED_OS"
    assert all(os_id in str(err.value) for os_id in data.SUPPORTED_OS)


@pytest.mark.parametrize("os_in", ["almalinux9", "centos9", "ol9"])
def test_a_rhel_rebuild_outside_the_list_is_refused_not_planned_as_rhel(os_in):
    # The stack roles accept RedHat and Rocky only; planning Alma as rhel9 would be refused on the node.
    with pytest.raises(StackError) as err:
        solve(dict(REQUEST, os=os_in))
    assert err.value.rule == "UNSUPPORTED_OS" and "rhel9" in str(err.value)


def test_the_docs_point_to_the_one_generated_list():
    from pathlib import Path
    repo = Path(__file__).resolve().parents[4]
    assert "### Supported operating systems\n" in (repo / "docs/compatibility.md").read_text()
    for doc in ("README.md", "docs/stack.md", "docs/preflight.md"):
        assert "compatibility.md#supported-operating-systems" in (repo / doc).read_text(), doc
    # The README's sentence names the same five OSes (test_every_row_names_what_the_parts_need pins the ids).
    readme = (repo / "README.md").read_text()
    assert "Ubuntu 20.04, 22.04 or 24.04, Debian 12, or RHEL/Rocky 9" in readme


def test_gpufleet_mirror_knows_the_same_oses_with_the_same_python_and_family():
    from gpufleet.mirror_targets import OS_RELEASES
    assert set(OS_RELEASES) == set(data.SUPPORTED_OS)
    for os_id, release in OS_RELEASES.items():
        assert (release.python, release.os_family) == (data.SUPPORTED_OS[os_id]["python"],
                                                       data.SUPPORTED_OS[os_id]["os_family"]), os_id
