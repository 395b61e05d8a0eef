"""`gpufleet mirror` for RPM plans: the dnf argv, and a clear error where there is no dnf (never a skip)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpufleet.mirror_dnf import dnf_argv, fetch_rpms, rpm_requests
from gpufleet.mirror_targets import MirrorError, PlanOptions, targets_from_plans
from test_mirror_plan import DNF_PLAN

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def target(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(DNF_PLAN))
    options = PlanOptions(kernel="5.14.0-427.el9.x86_64", os_archive_url="http://site/rocky9/BaseOS")
    target, = targets_from_plans([tmp_path / "plan.json"], options, REPO)
    return target


def test_the_plan_is_asked_of_dnf_at_its_versions(target):
    streams, names = rpm_requests(target)
    assert streams == ["nvidia-driver:535-open"]
    assert "nvidia-fabric-manager" in names and "cuda-toolkit-12-2" in names
    assert "libnccl-2.19.3-1+cuda12.2" in names and "libnccl-devel-2.19.3-1+cuda12.2" in names
    assert "kernel-devel-5.14.0-427.el9.x86_64" in names  # the nvidia_driver role's build packages


def test_dnf_resolves_every_dependency_from_an_empty_root_for_the_nodes_release(target, tmp_path):
    argv = dnf_argv(target, tmp_path / "root", tmp_path / "rpms", tmp_path / "key.pub", ["cuda-toolkit-12-2"])
    assert argv[:4] == ["dnf", "download", "--resolve", "--alldeps"]
    for option in (f"--installroot={tmp_path / 'root'}", "--releasever=9", "--forcearch=x86_64",
                   f"--destdir={tmp_path / 'rpms'}", "--setopt=reposdir=/dev/null",
                   "--repofrompath=gpufleet-cuda,https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/",
                   "--setopt=gpufleet-cuda.gpgcheck=1", f"--setopt=gpufleet-cuda.gpgkey=file://{tmp_path / 'key.pub'}",
                   "--repofrompath=gpufleet-os,http://site/rocky9/BaseOS"):
        assert option in argv
    assert argv[-1] == "cuda-toolkit-12-2"


@pytest.mark.skipif(shutil.which("dnf") is not None, reason="this machine has dnf")
def test_without_dnf_the_rpm_plan_is_an_error_naming_the_nodes(target, tmp_path):
    with pytest.raises(MirrorError) as err:
        fetch_rpms(target, tmp_path, tmp_path / "key.pub")
    assert "dnf is not available on this machine" in str(err.value) and "rhel9" in str(err.value)
    assert str(target.nodes[0]) in str(err.value)


def test_a_gb200_plan_asks_dnf_for_imex_and_dcgm_at_the_dcgm_version(tmp_path):
    """Issue 27: IMEX with the driver, DCGM 4 at the plan's dcgm_version (as gpu_diagnostics installs it)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve

    plan = solve({"gpus": ["NVIDIA GB200"], "os": "rhel9", "arch": "aarch64", "nvswitch": True, "torch": "2.7.0"})
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    target, = targets_from_plans([tmp_path / "plan.json"], PlanOptions(kernel="5.14.0-427.el9.aarch64"), REPO)
    _streams, names = rpm_requests(target)
    assert "nvidia-imex" in names and plan["packages"]["imex"] == ["nvidia-imex"]
    dcgm = plan["packages"]["dcgm"]
    assert dcgm and all(f"{name}-{plan['dcgm_version']}" in names for name in dcgm), names
