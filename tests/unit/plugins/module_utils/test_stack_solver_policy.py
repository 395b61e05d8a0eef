# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Supported drivers by default (issue 24, item 3): no end-of-life branch unless named; without a
named branch, the newest supported long-term or production branch that runs the GPUs and the
toolkit and that the OS repository carries; the sample inventory's request plans on every OS."""

import ast
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils import stack_solver
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve

REPO = Path(__file__).resolve().parents[4]
H100_HGX = {"gpus": ["NVIDIA H100 80GB HBM3"] * 8, "nvswitch": True}


def refused(request):
    with pytest.raises(StackError) as info:
        solve(request)
    return info.value


def sample_request():
    return yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "stack.yml").read_text())["gpufleet_stack_request"]


def supported(plan):
    return not plan["driver_branch_eol"] and plan["driver_branch_type"] in ("LTSB", "PB")


@pytest.mark.parametrize("os_key, cuda, branch", [
    ("ubuntu22.04", "12.2", "595"),
    ("ubuntu24.04", "12.5", "595"),   # ubuntu2404 has no CUDA before 12.5; R595 is seen in its repository
    ("debian12", "12.3", "580"),      # debian12 starts at CUDA 12.3
    ("rocky9", "12.2", "580"),
])
def test_the_sample_inventory_plans_a_supported_branch_on_every_os(os_key, cuda, branch):
    request = sample_request()
    assert "cuda" not in request, "the sample inventory leaves CUDA to the solver"
    plan = solve(dict(request, os=os_key, **H100_HGX))
    assert supported(plan), plan["driver_branch"]
    assert (plan["cuda_version"], plan["driver_branch"]) == (cuda, branch)
    note = next(w for w in plan["warnings"] if w.startswith("cuda not given"))
    assert ("newest of the default range" in note) == (cuda == "12.2")
    assert ("oldest newer toolkit" in note) == (cuda != "12.2")


def test_the_playbooks_default_request_leaves_cuda_to_the_solver():
    play = (REPO / "playbooks" / "tasks" / "gpu_stack_plan.yml").read_text()
    default = play.split("gpufleet_stack_request | default(", 1)[1].split(")", 1)[0]
    assert ast.literal_eval(default) == sample_request()


@pytest.mark.parametrize("cuda", ["11.7", "11.8", "12.0", "12.1", "12.2"])
@pytest.mark.parametrize("os_key", ["ubuntu22.04", "rocky9"])
def test_the_mission_cuda_range_runs_on_a_supported_driver(cuda, os_key):
    torch = "2.0.1" if cuda == "11.7" else "2.1.2"
    gpus = ["NVIDIA A100-SXM4-80GB"] if cuda == "11.7" else H100_HGX["gpus"]
    plan = solve({"gpus": gpus, "cuda": cuda, "torch": torch, "os": os_key})
    assert supported(plan)
    assert not any("end of life" in w for w in plan["warnings"])


def test_an_end_of_life_branch_is_planned_only_when_named():
    for branch, info in data.DRIVER_BRANCHES.items():
        if info["eol"]:
            assert branch not in stack_solver.supported_branches()
    plan = solve(dict(H100_HGX, cuda="12.2", torch="2.1.2", os="ubuntu22.04", driver_branch="535"))
    assert plan["driver_branch"] == "535" and plan["driver_branch_eol"]
    warning = next(w for w in plan["warnings"] if "end of life" in w)
    assert "since 2026-06" in warning and "planned because it was named" in warning and "R580 (LTSB" in warning
    assert plan["packages"]["driver"] == ["nvidia-kernel-open-535", "cuda-drivers-535"]


@pytest.mark.parametrize("branch", ["590", "610"])
def test_ended_new_feature_branches_plan_only_when_named(branch):
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.1", "os": "ubuntu24.04", "driver_branch": branch})
    assert plan["driver_branch"] == branch
    assert any("end of life" in w for w in plan["warnings"])
    assert solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.1", "os": "ubuntu24.04"})["driver_branch"] == "595"


def test_a_repository_with_no_branch_sourced_gets_the_newest_supported_branch_with_a_warning():
    # ubuntu2004: a supported OS whose repository has no branch sourced (rhel10 is refused: test_supported_os.py)
    plan = solve(dict(H100_HGX, cuda="12.8", os="ubuntu20.04"))
    assert plan["driver_branch"] == "620"
    assert any("seen: none sourced" in w for w in plan["warnings"])


def test_a_named_branch_the_repository_is_not_seen_to_carry_is_a_warning():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.4", "os": "debian12", "driver_branch": "595"})
    assert any("R595 is not seen in NVIDIA's debian12 repository" in w for w in plan["warnings"])


def test_volta_gets_no_branch_after_r580():
    plan = solve({"gpus": ["Tesla V100-SXM2-32GB"], "cuda": "12.5", "os": "ubuntu24.04"})
    assert plan["driver_branch"] == "580"   # R595 is newer and carried, but dropped Volta
    err = refused({"gpus": ["Tesla V100-SXM2-32GB"], "cuda": "12.5", "os": "ubuntu24.04", "driver_branch": "595"})
    assert err.rule == "BRANCH_DROPPED_GPU" and "R580 is the last" in str(err)
    assert err.alternatives == [{"driver_branch": "580"}]


@pytest.mark.parametrize("gpu, branch, need", [
    ("NVIDIA H200", "535", "550.90.07"), ("NVIDIA B300", "575", "580.82.07"), ("NVIDIA H20", "530", "535.161.07")])
def test_a_branch_below_the_gpus_minimum_driver_is_refused(gpu, branch, need):
    cuda = "12.9" if gpu == "NVIDIA B300" else "12.1"
    err = refused({"gpus": [gpu], "cuda": cuda, "driver_branch": branch, "driver_compat": "minor"})
    assert err.rule == "DRIVER_TOO_OLD_FOR_GPU" and need in str(err)
    for alt in err.alternatives:
        solve(dict({"gpus": [gpu], "cuda": cuda, "driver_branch": branch, "driver_compat": "minor"}, **alt))


def test_the_gpus_minimum_driver_raises_the_floor():
    plan = solve({"gpus": ["NVIDIA H200"], "cuda": "12.2", "driver_compat": "minor"})
    assert plan["driver_min_version"] == "550.90.07"


def test_no_supported_branch_is_a_refusal_that_names_the_ended_ones(monkeypatch):
    monkeypatch.setitem(data.DRIVER_BRANCHES, "580", dict(data.DRIVER_BRANCHES["580"], eol=True))
    stack_solver.quick_ok.cache_clear()
    try:
        err = refused({"gpus": ["Tesla V100-SXM2-32GB"], "cuda": "12.2"})
    finally:
        stack_solver.quick_ok.cache_clear()
    assert err.rule == "NO_SUPPORTED_BRANCH"
    assert "supported up to R580" in str(err)
    assert err.alternatives[0] == {"driver_branch": "580"}


def test_a_toolkit_that_bundles_no_driver_takes_the_first_release_that_runs_it():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.4", "torch": "2.14.0", "os": "ubuntu24.04"})
    assert plan["toolkit_driver_min_version"] == "620.70.06"
    assert plan["driver_branch"] == "620"
    assert plan["torch"]["variant"] == "cu134"
    assert any("no longer bundles a Linux driver" in w for w in plan["warnings"])


def test_a_toolkit_without_a_sourced_nccl_is_refused_with_alternatives():
    err = refused({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.5", "torch": "2.15.0", "os": "ubuntu24.04"})
    assert err.rule == "NCCL_MATCHES_CUDA" and "13.5" in str(err)
    assert err.alternatives
    for alt in err.alternatives:
        solve(dict({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.5", "torch": "2.15.0", "os": "ubuntu24.04"}, **alt))


@pytest.mark.parametrize("torch, cuda, variant", [("2.12.0", "13.0", "cu130"), ("2.13.0", "13.2", "cu132"),
                                                  ("2.15.0", "13.2", "cu132"), ("2.10.0", "12.8", "cu128")])
def test_new_torch_releases_plan_on_cuda_13(torch, cuda, variant):
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": cuda, "torch": torch, "os": "ubuntu24.04"})
    assert plan["torch"]["variant"] == variant and supported(plan)


def test_solver_functions_stay_under_80_lines():
    tree = ast.parse(Path(stack_solver.__file__).read_text())
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80]
    assert not long
