# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The one sourced table (compat_facts.py): every row has exactly one source that names a document,
an address and the date it was read; and the facts issue 24 asked for, with the four data errors it
found, read the way the sources state them."""

import re

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_facts as facts
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import MODELS, lookup_model

KINDS = {"os_python", "apt_unversioned", "cuda_release", "cuda_minor_floor", "cuda_nccl", "cc_first_cuda", "cc_last_cuda", "arch_last_branch",
         "branch", "branch_max_cuda", "branch_releases", "driver_release", "branch_recommended", "gpu_cc",
         "gpu_min_driver", "repo", "repo_cuda", "repo_branch", "nvlink_subnet_manager", "imex_domain",
         "dcgm_release", "kernel_modules", "supported_os", "refused_os"}


def test_every_row_has_one_known_source_with_a_date():
    assert facts.FACTS
    for row in facts.FACTS:
        assert len(row) == 4, row
        kind, key, _value, source = row
        assert kind in KINDS and key, row
        src = facts.SOURCES[source]
        assert src["document"].strip() and src["url"].strip(), source
        assert re.match(r"^20\d\d-\d\d-\d\d$", src["read"]) and src["read"] <= facts.AS_OF, source


def test_no_fact_is_stated_twice():
    keys = [(kind, key) for kind, key, _v, _s in facts.FACTS]
    assert len(keys) == len(set(keys))


def test_every_source_is_used():
    assert {s for _k, _key, _v, s in facts.FACTS} == set(facts.SOURCES)


def test_every_gpu_model_takes_its_compute_capability_from_the_table():
    cc = facts.rows("gpu_cc")
    assert {m["key"] for m in MODELS} == set(cc)
    for model in MODELS:
        assert model["compute_capability"] == cc[model["key"]]


# ------------------------------------------------------------------ the four data errors of issue 24


def test_compute_capability_10_3_needs_cuda_12_9():
    assert data.CC_SUPPORT["10.3"]["first_cuda"] == "12.9"
    assert lookup_model("NVIDIA B300 SXM6 AC")["compute_capability"] == "10.3"


def test_rpm_fabric_manager_is_nvidia_fabricmanager_from_r580():
    rules = data.FABRIC_MANAGER_PACKAGES["rhel"]
    assert [(r["from_branch"], r["packages"]) for r in rules] == [
        ("515", ["nvidia-fabric-manager"]), ("580", ["nvidia-fabricmanager"])]


def test_nvidias_debian12_repository_starts_at_cuda_12_3():
    rng = data.REPO_CUDA_RANGE["debian12"]
    assert rng["first"] == "12.3" and "first" in rng["verified"]
    assert not [b for b in data.REPO_BRANCHES["debian12"] if int(b) < 545]


def test_gh200_144g_hbm3e_is_its_own_model_with_144_gb():
    model = lookup_model("NVIDIA GH200 144G HBM3e")
    assert (model["key"], model["memory_gib"], model["memory_type"]) == ("gh200-144g", 144, "HBM3e")
    assert lookup_model("0x234810DE")["key"] == "gh200-144g"
    assert lookup_model("NVIDIA GH200 480GB")["memory_gib"] == 96
    assert "gh200-144g" in data.KERNEL_MODULES["open_required_models"]


# ------------------------------------------------------------------ December 2026


@pytest.mark.parametrize("release, driver", [
    ("13.1.0", "590.44.01"), ("13.1.1", "590.48.01"), ("13.2.0", "595.45.04"), ("13.2.1", "595.58.03"),
    ("13.2.2", "595.71.05"), ("13.3.0", "610.43.02"), ("13.3.1", "610.43.02"), ("13.5.0", "620.70.06")])
def test_cuda_13_x_driver_floors(release, driver):
    key = ".".join(release.split(".")[:2])
    assert data.CUDA_TOOLKITS[key]["updates"][release] == driver


def test_cuda_13_4_bundles_no_linux_driver():
    assert data.CUDA_TOOLKITS["13.4"]["updates"] == {"13.4.1": None, "13.4.2": None}
    assert "no longer bundled" in facts.cite("cuda_release", "13.3.1")


@pytest.mark.parametrize("branch, kind, eol, eol_date, max_cuda, newest", [
    ("535", "LTSB", True, "2026-06", "12.2", "535.288.01"),
    ("570", "PB", True, "2026-02", "12.8", "570.211.01"),
    ("580", "LTSB", False, "2028-06", "13.0", "580.178.04"),
    ("590", "NFB", True, None, "13.1", "590.48.01"),
    ("595", "PB", False, "2027-03", "13.2", "595.91.07"),
    ("610", "NFB", True, "2026-08", "13.3", "610.57.04"),
    ("620", "LTSB", False, "2029-09", "13.5", "620.70.06"),
])
def test_driver_branches_as_nvidia_lists_them(branch, kind, eol, eol_date, max_cuda, newest):
    b = data.DRIVER_BRANCHES[branch]
    assert (b["type"], b["eol"], b["eol_date"], b["max_cuda"], b["versions"][-1]) == (
        kind, eol, eol_date, max_cuda, newest)


def test_r580_is_the_last_branch_for_maxwell_pascal_and_volta():
    assert data.LAST_BRANCH_FOR_ARCH == {"Maxwell": "580", "Pascal": "580", "Volta": "580"}


@pytest.mark.parametrize("gpu, driver", [
    ("NVIDIA H100 80GB HBM3", "525.85.12"), ("NVIDIA H20", "535.161.07"), ("NVIDIA H200", "550.90.07"),
    ("NVIDIA B200", "570.133.20"), ("NVIDIA B300", "580.82.07"), ("NVIDIA RTX PRO 6000 Blackwell", "575.51.03"),
    ("NVIDIA A100-SXM4-80GB", "450.80.02"), ("NVIDIA A30", "460.73.01")])
def test_per_gpu_minimum_drivers_from_the_mig_user_guide(gpu, driver):
    assert data.GPU_MIN_DRIVER[lookup_model(gpu)["key"]] == driver


@pytest.mark.parametrize("os_id, distro", [("ubuntu26.04", "ubuntu2604"), ("debian13", "debian13"),
                                           ("rhel10", "rhel10")])
def test_new_operating_systems_have_their_repository(os_id, distro):
    assert data.REPO_DISTROS[os_id][0] == distro
    assert distro in data.REPO_PACKAGES_UNVERIFIED


def test_eol_is_judged_against_the_tables_review_date():
    # R595 ends in March 2027: supported on the review date; R535 (June 2026) and R610 (August 2026) ended.
    assert facts.AS_OF == "2026-12-06"
    assert [b for b, e in data.DRIVER_BRANCHES.items() if not e["eol"]] == ["580", "595", "620"]


def test_dcgm_release_is_a_sourced_row_read_in_a_package_listing():
    # issue 35: DCGM 4.6.0 (July 2026) superseded the hand-typed 4.5.2-1.
    assert facts.rows("dcgm_release") == {"dnf": "4.6.0-1", "apt": "1:4.6.0-1"}
    assert data.DCGM_PACKAGES["version"] == {"apt": "1:4.6.0-1", "dnf": "4.6.0-1"}
    listing = facts.source_of("dcgm_release", "dnf")
    assert "relnotes-2023.12.20260706" in listing["url"] and "datacenter-gpu-manager-4-core-4.6.0-1" in listing["document"]
    assert "epoch" in facts.source_of("dcgm_release", "apt")["document"]
    assert facts.cite("dcgm_release", "dnf") in data.DCGM_PACKAGES["source"]


def test_the_620_driver_guide_removes_the_proprietary_kernel_modules():
    assert facts.rows("kernel_modules") == {"proprietary_removed_from_branch": "620"}
    assert "Proprietary Kernel Modules Removed" in facts.source_of("kernel_modules", "proprietary_removed_from_branch")["document"]
    assert data.KERNEL_MODULES["proprietary_removed_from_branch"] == "620"
    assert "620" in data.KERNEL_MODULES["source"]
