"""Several CUDA toolkits side by side (issue 24 item 6): cuda as a list plans the newest one's driver and torch,
and every toolkit with the NCCL build for its CUDA."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve

H100 = {"gpus": ["NVIDIA H100 80GB HBM3"], "torch": "2.1.2", "arch": "x86_64", "nvswitch": True}


def test_a_list_plans_each_toolkit_with_its_nccl_on_the_newest_ones_driver():
    plan = solve({**H100, "cuda": ["12.2", "11.8"], "os": "ubuntu22.04"})
    single = solve({**H100, "cuda": "12.2", "os": "ubuntu22.04"})
    assert plan["cuda_version"] == "12.2" and plan["driver_branch"] == single["driver_branch"]
    assert plan["torch"] == single["torch"] and plan["nccl_package_version"] == single["nccl_package_version"]
    assert [(t["cuda_version"], t["nccl_package_version"]) for t in plan["toolkits"]] == [
        ("11.8", solve({**H100, "cuda": "11.8", "os": "ubuntu22.04", "driver_branch": single["driver_branch"]})["nccl_package_version"]),
        ("12.2", single["nccl_package_version"])]
    assert plan["packages"]["toolkit"] == ["cuda-toolkit-11-8", "cuda-toolkit-12-2"]
    assert plan["packages"]["nccl"] == single["packages"]["nccl"]
    assert not [w for w in plan["warnings"] if w.startswith("no torch requested")]
    # One toolkit: the same plan as before, with itself as its only toolkit.
    assert single["toolkits"] == [plan["toolkits"][-1]]


def test_a_toolkit_the_repository_lacks_is_refused_naming_it():
    with pytest.raises(StackError) as info:
        # torch 2.4.1: a release with a wheel for Ubuntu 24.04's Python 3.12 (2.1.2 has none; issue 34)
        solve({**H100, "torch": "2.4.1", "cuda": ["11.8", "12.5"], "os": "ubuntu24.04"})
    assert info.value.rule == "REPO_LACKS_CUDA"
    assert info.value.args[0].startswith("side-by-side toolkit CUDA 11.8 (beside 12.5): NVIDIA's ubuntu2404 repository does not carry CUDA 11.8")


@pytest.mark.parametrize("cuda, why", [([], "empty list"), (["12.2", "12.2.2"], "lists a toolkit twice")])
def test_bad_lists_are_refused(cuda, why):
    with pytest.raises(StackError, match=why):
        solve({**H100, "cuda": cuda, "os": "ubuntu22.04"})
