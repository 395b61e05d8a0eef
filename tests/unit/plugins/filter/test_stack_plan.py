"""The stack_plan filter: thin wrapper, AnsibleFilterError with the rule, and
loadable by FQCN through Ansible itself."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import (
    FilterModule, StackPlanError, stack_plan)

_REPO = Path(__file__).resolve().parents[4]


def test_registered_name():
    assert FilterModule().filters() == {"stack_plan": stack_plan}


def test_plan_shape():
    plan = stack_plan({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": "12.2", "torch": "2.1.2",
                       "os": "ubuntu22.04", "arch": "x86_64", "nvswitch": False})
    for key in ("cuda_version", "driver_branch", "driver_min_version", "packages", "repository", "torch", "warnings"):
        assert key in plan
    assert set(plan["packages"]) == {"driver", "toolkit", "nccl", "fabricmanager", "imex", "nvlsm", "dcgm"}
    assert set(plan["torch"]) >= {"version", "variant", "index_url", "torchvision", "torchaudio"}
    json.dumps(plan)  # plain data only


def test_overrides_merge_over_the_request():
    plan = stack_plan({"cuda": "12.2", "torch": "2.1.2"}, gpus=["NVIDIA H100 80GB HBM3"], os="rhel9", nvswitch=True)
    # NVIDIA's RHEL repository names the fabric manager RPM without the branch (nvidia-fabricmanager from R580)
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    assert plan["package_family"] == "dnf"


def test_refusal_is_an_ansible_filter_error_with_the_rule():
    with pytest.raises(AnsibleFilterError) as info:
        stack_plan({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "11.7", "torch": "2.0.1"})
    assert isinstance(info.value, StackPlanError)
    assert info.value.rule == "CC_NEEDS_NEWER_CUDA"
    assert "[CC_NEEDS_NEWER_CUDA]" in str(info.value)
    assert info.value.alternatives[0] == {"cuda": "11.8", "torch": "2.0.1", "torch_variant": "cu118"}


def _ansible(expr):
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_CONFIG"] = str(_REPO / "ansible.cfg")
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
    env["ANSIBLE_LOAD_CALLBACK_PLUGINS"] = "1"
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    env["ANSIBLE_NOCOLOR"] = "1"
    ansible = os.path.join(venv_bin, "ansible")
    if not os.path.exists(ansible):
        pytest.skip("ansible is not installed next to this Python")
    return subprocess.run(
        [ansible, "localhost", "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-m", "ansible.builtin.debug", "-a", "msg={{ %s }}" % expr],
        cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=120, check=False)


def test_filter_loads_by_fqcn_in_ansible():
    proc = _ansible("{'gpus': ['NVIDIA H100 80GB HBM3'], 'cuda': '12.2', 'torch': '2.1.2', 'os': 'ubuntu22.04', "
                    "'arch': 'x86_64', 'nvswitch': true} | gpufleet.cluster.stack_plan")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "535.54.03" in out and "cu121" in out and "nvidia-driver-pinning-595" in out and "libnccl2=2.19.3-1+cuda12.2" in out


def test_refusal_through_ansible_is_a_readable_sentence():
    proc = _ansible("{'gpus': ['NVIDIA H100 80GB HBM3'], 'cuda': '11.7', 'torch': '2.0.1'} | gpufleet.cluster.stack_plan")
    assert proc.returncode != 0
    out = " ".join((proc.stdout + proc.stderr).split())
    assert "CC_NEEDS_NEWER_CUDA" in out and "needs CUDA 11.8 or newer" in out and "cuda 11.8 with torch 2.0.1 (cu118)" in out
