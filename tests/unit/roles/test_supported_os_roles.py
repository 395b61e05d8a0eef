"""Every OS the solver plans is accepted by every stack role and by preflight (issue 37, the one OS list).

Walks compat_packages SUPPORTED_OS: for each OS id the solver plans and each "<distribution> <version>" the
row names (RHEL 9 also as Rocky 9), the stack roles are loaded the way Ansible loads them (defaults, vars/,
then the platform's vars files; tests/unit/roles/test_stack_rhel_render.py) and the `when` of their
"Fail on an operating system the role does not support" task is rendered: it must be false. The roles
that check only the OS family must list the row's family, and preflight's default list must hold the id.
An OS the solver refuses (RHEL/Rocky 8) is refused by the roles too.
"""

from __future__ import annotations

import pytest
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve
from test_stack_rhel_render import LOADER, ROLES_DIR, STACK_ROLES, load, render, role_vars, walk

FAMILY_ROLES = ["gpu_diagnostics", "rdma"]
OS_CHECK = "Fail on an operating system the role does not support"


def facts_of(distribution_key: str, os_family: str) -> dict:
    distribution, version = distribution_key.split(" ")
    return {"distribution": distribution, "distribution_version": version if "." in version else version + ".4",
            "distribution_major_version": version.split(".")[0], "os_family": os_family,
            "architecture": "x86_64", "kernel": "6.8.0-45-generic"}


def planned_platforms():
    for os_id, row in sorted(data.SUPPORTED_OS.items()):
        for key in row["ansible"]:
            yield os_id, key, row["os_family"]


def refused(role: str, facts: dict) -> bool:
    task = next(t for t in walk(load(ROLES_DIR / role / "tasks/set_vars.yml")) if t.get("name") == OS_CHECK)
    templar = Templar(loader=LOADER, variables=role_vars(role, facts))
    return render(templar, trust_as_template("{{ (%s) | bool }}" % task["when"])) is True


@pytest.mark.parametrize("os_id,platform,family", list(planned_platforms()))
@pytest.mark.parametrize("role", STACK_ROLES)
def test_every_stack_role_accepts_every_os_the_solver_plans(role, os_id, platform, family):
    assert solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.6", "torch": "2.4.1", "os": os_id})["os"] == os_id
    assert not refused(role, facts_of(platform, family)), f"{role} refuses {platform} ({os_id}), which the solver plans"


@pytest.mark.parametrize("role", STACK_ROLES)
@pytest.mark.parametrize("platform", ["Rocky 8", "RedHat 8", "Debian 11", "Ubuntu 26.04", "RedHat 10"])
def test_an_os_the_solver_refuses_is_refused_by_the_roles_too(role, platform):
    assert refused(role, facts_of(platform, "Debian" if platform.split()[0] in ("Debian", "Ubuntu") else "RedHat"))


@pytest.mark.parametrize("role", FAMILY_ROLES)
def test_roles_that_check_the_family_accept_every_planned_family(role):
    families = load(ROLES_DIR / role / "vars/main.yml")[f"__{role}_supported_os_families"]
    assert {row["os_family"] for row in data.SUPPORTED_OS.values()} <= set(families)


def test_preflight_checks_nodes_against_the_same_list():
    variables = dict(load(ROLES_DIR / "preflight/defaults/main.yml"))
    templar = Templar(loader=LOADER, variables=variables)
    assert render(templar, variables["preflight_supported_os"]) == sorted(data.SUPPORTED_OS)


@pytest.mark.parametrize("meta", sorted(ROLES_DIR.glob("*/meta/main.yml")), ids=lambda p: p.parts[-3])
def test_no_role_advertises_an_enterprise_linux_release_outside_the_list(meta):
    # Galaxy's platforms: EL 8 nodes cannot run ansible-core 2.17+'s modules (python 3.6), so no role lists it.
    majors = {p.split(" ")[1] for row in data.SUPPORTED_OS.values() if row["os_family"] == "RedHat" for p in row["ansible"]}
    for platform in load(meta)["galaxy_info"].get("platforms", []):
        if platform["name"] == "EL":
            assert set(map(str, platform["versions"])) <= majors, meta
