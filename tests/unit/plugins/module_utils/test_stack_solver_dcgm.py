# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""DCGM 4 in the plan (issue 27 item 6): the -core package and the diagnostics package of the toolkit's CUDA
major, at one sourced DCGM release; a CUDA major without a DCGM 4 package is not planned, and the plan says why."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import dcgm_plan, solve

H100 = {"gpus": ["NVIDIA H100 80GB HBM3"] * 8, "nvswitch": True}


@pytest.mark.parametrize("os_in, cuda, major", [
    ("ubuntu22.04", "12.2", "12"), ("ubuntu22.04", "12.8", "12"), ("debian12", "12.4", "12"),
    ("ubuntu24.04", "13.0", "13"), ("ubuntu24.04", "13.2", "13"), ("ubuntu22.04", "11.8", "11"),
])
def test_plan_picks_the_dcgm_package_of_the_toolkits_cuda_major(os_in, cuda, major):
    plan = solve(dict(H100, os=os_in, cuda=cuda))
    assert plan["cuda_version"].split(".")[0] == major
    assert plan["packages"]["dcgm"] == ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda" + major]
    assert plan["dcgm_version"] == "1:4.6.0-1"  # apt's version carries DCGM's epoch
    assert "DCGM_MATCHES_CUDA" in plan["rules_checked"]
    assert not any("DCGM 4 not planned" in w for w in plan["warnings"])


def test_dnf_plan_names_the_rpm_version():
    plan = solve(dict(H100, os="rhel9", cuda="12.4"))
    assert plan["packages"]["dcgm"] == ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"]
    assert plan["dcgm_version"] == "4.6.0-1"


def test_side_by_side_plan_takes_dcgm_for_the_newest_toolkit():
    plan = solve(dict(H100, os="ubuntu22.04", cuda=["11.8", "12.2"]))
    assert plan["packages"]["dcgm"][-1] == "datacenter-gpu-manager-4-cuda12"


@pytest.mark.parametrize("cuda", ["10.2", "14.0"])
def test_a_cuda_major_without_a_dcgm4_package_is_not_planned_and_named(cuda):
    out = dcgm_plan("apt", cuda)
    assert out["packages"] == [] and out["version"] is None
    major = cuda.split(".")[0]
    assert "datacenter-gpu-manager-4-cuda%s" % major in out["reason"] and "CUDA %s" % cuda in out["reason"]
    assert "11, 12, 13" in out["reason"]  # what would work


def test_every_planned_cuda_major_has_a_dcgm_package():
    """The plan's CUDA range never reaches a major the DCGM row lacks (or the nodes would get no diagnostics)."""
    majors = {key.split(".")[0] for key in data.CUDA_TOOLKITS}
    assert majors <= set(data.DCGM_PACKAGES["cuda_majors"])
    assert data.DCGM_PACKAGES["source"]
