"""Requests without torch, and the nodes' Python (issue 34).

A request that names no torch gets the newest torch that has a wheel for the chosen CUDA, the GPUs and the
OS's python3, and the plan says why; ``torch: none`` (or null, false, "") plans none, and says so. A torch
whose wheels (PyPI's cp tags and Requires-Python, compat_release_data) exclude the OS's python3
(compat_facts ``os_python``) is refused, naming that Python and the releases that install there.
Every request shape the docs and the sample inventory show is solved here on every OS with a Python row.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils import request_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve, vkey

REPO = Path(__file__).resolve().parents[4]
H100 = "NVIDIA H100 80GB HBM3"
SUPPORTED = ["ubuntu22.04", "ubuntu24.04", "debian12", "rhel9"]


def test_a_request_without_torch_plans_the_torch_that_fits_and_says_why():
    plan = solve({"cuda": "13.0", "os": "ubuntu24.04", "gpus": [H100]})
    torch = plan["torch"]
    assert torch is not None and torch["variant"].startswith("cu13")
    assert "3.12" in torch["python_versions"] and torch["python"] == "3.12"
    newer = [t for t in data.TORCH_RELEASES if vkey(t) > vkey(torch["version"])]
    assert all("3.12" not in data.TORCH_RELEASES[t]["python"]["versions"] or
               not any(v.startswith("cu13") for v in data.TORCH_RELEASES[t]["variants"]) for t in newer)
    assert plan["reasons"]["torch"].startswith("not named; torch %s, the newest release with a wheel for CUDA 13"
                                               % torch["version"])
    assert "Python 3.12" in plan["reasons"]["torch"]
    assert any(w.startswith("torch not given; planned torch %s" % torch["version"]) for w in plan["warnings"])


@pytest.mark.parametrize("declined", ["none", "None", None, False, ""])
def test_torch_none_plans_no_pytorch_and_says_so(declined):
    plan = solve({"cuda": "13.0", "torch": declined, "os": "ubuntu24.04", "gpus": [H100]})
    assert plan["torch"] is None
    assert plan["reasons"]["torch"] == "not requested (torch: none): no PyTorch is installed"
    assert "no torch requested (torch: none); the plan has no PyTorch wheel" in plan["warnings"]
    assert plan["cuda_version"] == "13.0" and plan["nccl_package_version"]


def test_torch_none_with_a_variant_is_refused():
    with pytest.raises(StackError) as err:
        solve({"torch": "none", "torch_variant": "cu126", "os": "ubuntu22.04", "gpus": [H100]})
    assert err.value.rule == "BAD_REQUEST" and "torch_variant cu126 was given with torch: none" in str(err.value)


def test_a_torch_without_a_wheel_for_the_os_python_is_refused_naming_it():
    with pytest.raises(StackError) as err:
        solve({"torch": "2.1.2", "os": "ubuntu24.04", "gpus": [H100]})
    text = str(err.value)
    assert err.value.rule == "TORCH_NO_WHEEL_FOR_PYTHON"
    assert "torch 2.1.2 has no wheel for Python 3.12, the python3 of ubuntu24.04" in text
    assert "its wheels are for Python 3.8, 3.9, 3.10, 3.11" in text
    assert err.value.alternatives
    for alt in err.value.alternatives:  # every release offered installs there
        assert "3.12" in data.TORCH_RELEASES[alt["torch"]]["python"]["versions"]
        assert solve({"torch": alt["torch"], "os": "ubuntu24.04", "gpus": [H100]})["torch"]["version"] == alt["torch"]


def test_a_torch_that_needs_a_newer_python_than_the_os_is_refused():
    with pytest.raises(StackError) as err:
        solve({"cuda": "13.2", "torch": "2.15.0", "os": "ubuntu22.04", "gpus": [H100]})
    assert err.value.rule == "TORCH_NO_WHEEL_FOR_PYTHON"
    assert "no wheel for Python 3.10, the python3 of ubuntu22.04" in str(err.value)


def test_the_alternatives_of_another_refusal_install_on_the_os_python():
    """A refusal for another reason offers only torch releases the OS's python3 takes."""
    with pytest.raises(StackError) as err:
        solve({"cuda": "11.8", "torch": "2.9.0", "os": "ubuntu22.04", "gpus": [H100]})
    for alt in err.value.alternatives:
        if alt.get("torch"):
            assert "3.10" in data.TORCH_RELEASES[alt["torch"]]["python"]["versions"], alt


def test_every_os_the_solver_plans_has_a_python_row():
    # An OS without one (rhel8, debian11) is outside the one OS list and refused (test_supported_os.py).
    assert set(data.SUPPORTED_OS) <= set(data.OS_PYTHON)
    for os_id in data.SUPPORTED_OS:
        assert solve({"torch": "2.4.1", "cuda": "12.6", "os": os_id, "gpus": [H100]})["python"] == data.OS_PYTHON[os_id]


def test_each_os_python_row_is_sourced():
    assert {k: v["python"] for k, v in data.OS_PYTHON.items() if k in SUPPORTED} == {
        "ubuntu22.04": "3.10", "ubuntu24.04": "3.12", "debian12": "3.11", "rhel9": "3.9"}
    for entry in data.OS_PYTHON.values():
        assert entry["url"].startswith("https://") and entry["source"]


def test_a_side_by_side_request_plans_torch_for_the_newest_toolkit_only():
    plan = solve({"cuda": ["12.5", "13.0"], "os": "ubuntu24.04", "gpus": [H100]})
    assert plan["torch"]["variant"].startswith("cu13")
    assert [t["cuda_version"] for t in plan["toolkits"]] == ["12.5", "13.0"]


def test_the_sample_inventory_torch_installs_on_every_supported_os():
    sample = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "stack.yml").read_text())
    request = sample["gpufleet_stack_request"]
    newest = max(data.TORCH_RELEASES, key=vkey)
    for os_key in SUPPORTED + ["rocky9"]:
        plan = solve(dict(request, os=os_key, gpus=[H100] * 8, nvswitch=True))
        assert plan["torch"]["version"] == request["torch"], os_key
    # current: no newer torch release installs on every supported OS's python3
    pythons = {data.OS_PYTHON[k]["python"] for k in SUPPORTED}
    everywhere = [t for t in data.TORCH_RELEASES if pythons <= set(data.TORCH_RELEASES[t]["python"]["versions"])]
    assert request["torch"] == max(everywhere, key=vkey) and vkey(newest) > vkey(request["torch"])


# Every request shape the docs and the sample inventory show (docs/stack.md, docs/compatibility.md,
# docs/architecture.md, PLAN_CONTRACT.md, inventory/group_vars/all/stack.yml), and the issue's.
SHAPES = [
    {}, {"torch": "2.8.0"}, {"torch": "2.1.2"}, {"cuda": "13.0"}, {"cuda": "13.0", "torch": "none"},
    {"torch": "none"}, {"cuda": "12.2", "torch": "2.1.2"}, {"cuda": "12.2.1", "torch": "2.1.2"},
    {"cuda": "12.4", "torch": "2.6.0", "torch_variant": "cu124"}, {"cuda": "12.4", "torch": "2.6.0+cu124"},
    {"cuda": ["11.8", "12.2"], "torch": "2.1.2"}, {"cuda": ["12.5", "13.2"], "torch": "2.13.0"},
    {"cuda": ["12.5", "13.0"]}, {"torch": "2.1.2", "driver_branch": "535"},
    {"cuda": "12.8", "torch": "2.7.0", "driver_branch": "570"},
    {"cuda": "12.2", "torch": "2.1.2", "kernel_modules": "proprietary"},
    {"cuda": "13.0", "torch": "2.9.0", "allow_cuda_major_mismatch": True}, {"torch": "2.1", "driver_compat": "minor"},
    {"cuda": "12.2", "torch": None}, {"cuda": "12.2", "torch": False}, {"cuda": "12.2", "torch": ""},
    {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "count": 8}], "torch": "2.8.0"},
]


@pytest.mark.parametrize("os_key", SUPPORTED)
@pytest.mark.parametrize("request_", SHAPES, ids=[str(s) for s in SHAPES])
def test_every_documented_request_shape_plans_or_is_refused_by_a_rule(os_key, request_):
    """No shape crashes: a plan whose torch is a planned wheel or None with a reason, or a StackError."""
    try:
        plan = solve(dict(request_, os=os_key, gpus=[H100] * 8, nvswitch=True))
    except StackError as exc:
        assert exc.rule in data.RULES and str(exc).startswith("[%s] " % exc.rule)
        return
    assert plan["reasons"]["torch"] and plan["reasons"]["cuda"] and plan["reasons"]["driver_branch"]
    if plan["torch"] is not None:
        assert plan["torch"]["version"] in data.TORCH_RELEASES and plan["torch"]["index_url"]
        assert plan["python"] is None or plan["python"]["python"] in plan["torch"]["python_versions"]
    else:
        assert request_.get("torch") in ("none", None, False, "") or "none planned" in plan["reasons"]["torch"]


@pytest.mark.parametrize("request_", SHAPES, ids=[str(s) for s in SHAPES])
def test_every_documented_request_shape_passes_the_schema_or_is_refused_as_the_solver_refuses_it(request_):
    """What `gpufleet run` checks before Ansible starts (request_schema) agrees with the solver on every shape the
    docs show: a shape the solver plans is no configuration error (torch: none once was), and one the schema
    refuses is refused by the solver too, whatever the OS."""
    problems = request_schema.request_problems(request_)
    planned = []
    for os_key in SUPPORTED:
        try:
            planned.append(solve(dict({"gpus": [H100] * 8}, **request_, os=os_key, nvswitch=True)))
        except StackError:
            pass
    # A schema refusal of a shape the solver plans somewhere would stop a good configuration (exit 2).
    assert not (planned and problems), problems
