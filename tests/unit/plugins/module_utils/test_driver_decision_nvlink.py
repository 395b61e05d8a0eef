# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Blackwell's NVLink stack in the driver decision (issue 27 item 5): IMEX with the driver and the fabric manager at
exactly the driver's version; NVLSM at its own date version, asked of the repository, installed, held and locked
at what was installed. The plans come from the solver as playbooks/tasks/gpu_stack_roles.yml wires them."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision as dd

NVLSM_NEWEST = "2025.10.14-1"   # a date version NVIDIA's repositories carry (compat_packages NVLSM_PACKAGES source)
RPM_OPEN = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-libs", "kmod-nvidia-open-dkms"]


def role_plan(gpus, os_name="ubuntu22.04", nvswitch=True, nvlsm_version="", **request) -> dict:
    plan = stack_plan({"cuda": "12.8", **request}, gpus=gpus, os=os_name,
                      arch="aarch64" if "GB" in gpus[0] else "x86_64", nvswitch=nvswitch)
    dnf = plan["package_family"] == "dnf"
    return {"branch": plan["driver_branch"], "min_version": plan["driver_min_version"],
            "version": plan["driver_recommended_version"], "kernel_modules": plan["kernel_modules"],
            "packages": plan["packages"]["driver"], "fabricmanager_packages": plan["packages"]["fabricmanager"],
            "imex_packages": plan["packages"]["imex"], "nvlsm_packages": plan["packages"]["nvlsm"],
            "nvlsm_version": nvlsm_version,
            "flavour_packages": plan["driver_flavour_packages"], "flavour_switch": plan["driver_flavour_switch"],
            "keep_unpackaged": False, "allow_replace": False, "repo_check_packages": [],
            "repository": plan["repository"], "manager": "dnf" if dnf else "apt",
            "rpm_packages": RPM_OPEN if dnf else []}


def repo(plan: dict) -> dict:
    """repo_packages_info's answer: the driver's names at the plan's release, NVLSM at its newest date version."""
    resolved = {}
    for r in dd.repository_requests(plan):
        resolved[r["name"]] = (NVLSM_NEWEST if r["name"] == "nvlsm" else "595-1" if r["match"] == "branch"
                               else r["version"] + "-1ubuntu1")
    return {"ok": True, "message": "", "resolved": resolved}


def fresh_node(plan):
    return dd.describe_node(plan["manager"], {"files": "", "owners": "", "packages": "", "smi_version": "",
                                              "previous": [], "branch_packages": ""}, plan["flavour_packages"])


def test_hgx_b200_asks_for_nvlsm_at_any_version_and_the_fabric_manager_at_the_drivers():
    plan = role_plan(["NVIDIA B200"] * 8)
    requests = dd.repository_requests(plan)
    assert {"name": "nvlsm", "version": "", "match": "any"} in requests
    assert {"name": "nvidia-fabricmanager", "version": plan["version"], "match": "upstream"} in requests
    # The operator's pin asks for that NVLSM release instead.
    pinned = dd.repository_requests(role_plan(["NVIDIA B200"] * 8, nvlsm_version="2025.06.5"))
    assert {"name": "nvlsm", "version": "2025.06.5", "match": "upstream"} in pinned


def test_hgx_b200_installs_holds_and_locks_nvlsm_at_its_own_version():
    plan = role_plan(["NVIDIA B200"] * 8)
    decision = dd.decide(fresh_node(plan), plan, repo(plan), host="b200-1")
    assert decision["action"] == "install" and not decision["stop"]
    assert f"nvidia-fabricmanager={plan['version']}-1ubuntu1" in decision["install_args"]
    assert "nvlsm=" + NVLSM_NEWEST in decision["install_args"]
    # What the role holds (dpkg_selections over target.packages) includes NVLSM.
    assert decision["target"]["packages"]["nvlsm"] == NVLSM_NEWEST
    locks = {lock["name"]: lock["version"] for lock in decision["locks"]}
    assert locks["nvlsm"] == "2025.10.14" and locks["nvidia-fabricmanager"] == plan["version"]


def test_a_kept_driver_without_nvlsm_is_brought_to_the_plan():
    plan = role_plan(["NVIDIA B200"] * 8, driver_branch="580")
    upstream = plan["version"]
    listing = "".join(f"{n} {upstream}-1ubuntu1 ii \n" for n in plan["packages"] + plan["fabricmanager_packages"])
    node = dd.describe_node("apt", {"files": "/usr/bin/nvidia-smi\n", "owners": f"{plan['packages'][-1]}: /usr/bin/nvidia-smi\n",
                                    "packages": listing, "smi_version": upstream, "previous": [],
                                    "branch_packages": ""}, plan["flavour_packages"])
    assert dd.decide(node, plan, repo(plan))["action"] == "upgrade"
    with_nvlsm = dd.describe_node("apt", {"files": "/usr/bin/nvidia-smi\n",
                                          "owners": f"{plan['packages'][-1]}: /usr/bin/nvidia-smi\n",
                                          "packages": listing + f"nvlsm {NVLSM_NEWEST} ii \n", "smi_version": upstream,
                                          "previous": [], "branch_packages": ""}, plan["flavour_packages"])
    kept = dd.decide(with_nvlsm, plan, repo(plan))
    assert kept["action"] == "keep" and kept["target"]["packages"]["nvlsm"] == NVLSM_NEWEST


def test_gb200_installs_imex_at_the_drivers_exact_version_and_no_fabric_manager():
    plan = role_plan(["NVIDIA GB200"] * 4, os_name="ubuntu24.04", nvswitch=False, driver_branch="580")
    assert plan["imex_packages"] == ["nvidia-imex"] and plan["fabricmanager_packages"] == [] == plan["nvlsm_packages"]
    assert {"name": "nvidia-imex", "version": plan["version"], "match": "upstream"} in dd.repository_requests(plan)
    decision = dd.decide(fresh_node(plan), plan, repo(plan))
    assert f"nvidia-imex={plan['version']}-1ubuntu1" in decision["install_args"]
    assert {"name": "nvidia-imex", "version": plan["version"]} in decision["locks"]


def test_dnf_names_nvlsm_without_the_drivers_version():
    plan = role_plan(["NVIDIA B200"] * 8, os_name="rhel9", driver_branch="580")
    decision = dd.decide(fresh_node(plan), plan, {"ok": True, "message": "",
                                                  "resolved": {"nvlsm": "2025.10.14-1"}})
    assert "nvlsm" in decision["install_args"]
    assert f"nvidia-fabricmanager-{plan['version']}" in decision["install_args"]
    pinned = role_plan(["NVIDIA B200"] * 8, os_name="rhel9", driver_branch="580", nvlsm_version="2025.06.5")
    assert "nvlsm-2025.06.5" in dd.decide(fresh_node(pinned), pinned, {"ok": True, "resolved": {}})["install_args"]
