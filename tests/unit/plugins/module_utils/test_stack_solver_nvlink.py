# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Blackwell's NVLink stack in the plan (issue 27 item 5): NVLSM beside the fabric manager on HGX B200/B300,
IMEX at the driver's exact version on GB200/GB300, nothing of either elsewhere."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_facts as facts
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import nvlink_packages, solve

HGX_B200 = {"gpus": ["NVIDIA B200"] * 8, "nvswitch": True, "os": "ubuntu22.04", "cuda": "12.8"}


def test_hgx_b200_plans_nvlsm_beside_the_fabric_manager_and_no_imex():
    plan = solve(HGX_B200)
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    assert plan["packages"]["nvlsm"] == ["nvlsm"]
    assert plan["packages"]["imex"] == [] and plan["imex_version"] is None
    assert plan["fabricmanager_version"] == plan["driver_recommended_version"]
    assert {"NVLINK5_NEEDS_NVLSM", "MNNVL_NEEDS_IMEX"} <= set(plan["rules_checked"])
    assert any("NVLink Subnet Manager" in w and "ib_umad" in w for w in plan["warnings"])


@pytest.mark.parametrize("gpu", ["NVIDIA B300", "NVIDIA B100"])
def test_other_nvlink5_baseboards_plan_nvlsm(gpu):
    plan = solve(dict(HGX_B200, gpus=[gpu] * 8, cuda="12.9" if "B300" in gpu else "12.8"))
    assert plan["packages"]["nvlsm"] == ["nvlsm"]


def test_b200_without_nvswitch_plans_neither_fabric_manager_nor_nvlsm():
    plan = solve(dict(HGX_B200, nvswitch=False))
    assert plan["packages"]["fabricmanager"] == [] and plan["packages"]["nvlsm"] == []


def test_hgx_h100_plans_the_fabric_manager_only():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"] * 8, "nvswitch": True, "os": "ubuntu22.04", "cuda": "12.2"})
    assert plan["packages"]["fabricmanager"] and plan["packages"]["nvlsm"] == [] and plan["packages"]["imex"] == []
    assert not any("NVLink Subnet Manager" in w or "nvidia-imex" in w for w in plan["warnings"])


@pytest.mark.parametrize("os_in, branch, imex", [
    ("ubuntu22.04", "570", ["nvidia-imex-570"]),
    ("ubuntu24.04", "580", ["nvidia-imex"]),
    ("rhel9", "570", ["nvidia-imex-570"]),
    ("rhel9", "580", ["nvidia-imex"]),
])
def test_gb200_plans_imex_at_the_drivers_exact_version(os_in, branch, imex):
    plan = solve({"gpus": ["NVIDIA GB200"] * 4, "os": os_in, "arch": "aarch64", "cuda": "12.8",
                  "driver_branch": branch})
    assert plan["packages"]["imex"] == imex
    assert plan["imex_version"] == plan["driver_recommended_version"]
    assert plan["imex_version"].split(".")[0] == branch
    # A compute tray sees no NVSwitch of its own: no fabric manager, no NVLSM.
    assert plan["packages"]["fabricmanager"] == [] and plan["packages"]["nvlsm"] == []
    assert any(imex[0] in w and plan["imex_version"] in w for w in plan["warnings"])


def test_gb300_plans_imex():
    plan = solve({"gpus": ["NVIDIA GB300"] * 4, "os": "ubuntu24.04", "arch": "aarch64"})
    assert plan["packages"]["imex"] == ["nvidia-imex"]


def test_imex_names_follow_the_580_rename_per_graph():
    gb200 = [{"name": "NVIDIA GB200"}]
    assert nvlink_packages("ubuntu", "575", gb200, False)["imex"] == ["nvidia-imex-575"]
    assert nvlink_packages("debian", "595", gb200, False)["imex"] == ["nvidia-imex"]
    assert nvlink_packages("rhel", "575", gb200, False)["imex"] == ["nvidia-imex-575"]
    # A GPU known only by its compute capability is not assumed to sit in an NVL72 rack.
    assert nvlink_packages("ubuntu", "580", [{"name": "compute capability 10.0"}], True) == {"imex": [], "nvlsm": []}


def test_every_gpu_the_rules_name_is_a_sourced_row_of_a_known_model():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import lookup_model
    for kind, gpus in (("imex_domain", data.IMEX_PACKAGES["gpus"]), ("nvlink_subnet_manager", data.NVLSM_PACKAGES["gpus"])):
        assert gpus, kind
        for key in gpus:
            assert lookup_model(key)["key"] == key
            assert facts.source_of(kind, key)["url"].startswith("https://")
    assert data.NVLSM_PACKAGES["source"] and data.IMEX_PACKAGES["source"]
