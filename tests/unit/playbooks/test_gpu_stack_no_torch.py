"""A plan without PyTorch (issue 34: ``{"cuda": "13.0"}`` with ``torch: none``) goes through the stack playbook
without touching torch: the values the playbook hands the roles and the record template from that plan (they
crashed with "'NoneType' has no attribute 'version'" once the driver, CUDA and NCCL were installed), the
record leaves the pytorch role out, and the role's include is skipped. Rendered the way Ansible templates
play variables, from the solver's own plan; the role itself is run in tests/unit/roles/test_pytorch_inputs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve

REPO = Path(__file__).resolve().parents[3]
init_plugin_loader()
H100 = "NVIDIA H100 80GB HBM3"


def stack_play():
    return yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())[0]


def render(expression, plan):
    variables = dict(stack_play()["vars"], gpu_stack_plan=plan, inventory_hostname="gpu-a01")
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


@pytest.fixture(scope="module")
def plan_without_torch():
    plan = solve({"cuda": "13.0", "torch": "none", "os": "ubuntu24.04", "gpus": [H100]})
    assert plan["torch"] is None
    return plan


@pytest.mark.parametrize("name", ["pytorch_version", "pytorch_variant", "pytorch_torchvision_version",
                                  "pytorch_torchaudio_version", "pytorch_index_url"])
def test_the_pytorch_inputs_are_empty_for_a_plan_without_torch(plan_without_torch, name):
    assert render("{{ %s }}" % name, plan_without_torch) == ""


def test_the_pytorch_inputs_still_carry_a_planned_torch():
    plan = solve({"cuda": "12.4", "torch": "2.6.0", "os": "ubuntu22.04", "gpus": [H100]})
    assert render("{{ pytorch_version }}+{{ pytorch_variant }}", plan) == "2.6.0+cu124"
    assert render("{{ pytorch_index_url }}", plan) == "https://download.pytorch.org/whl/cu124"


def test_the_record_and_the_roles_leave_pytorch_out_without_torch(plan_without_torch):
    probe = next(t for t in stack_play()["pre_tasks"] if "gpufleet.cluster.stack_record" in t)
    roles = render(probe["gpufleet.cluster.stack_record"]["roles"], plan_without_torch)
    assert roles == ["nvidia_driver", "cuda_toolkit", "nccl"]
    roles_file = yaml.safe_load((REPO / "playbooks" / "tasks" / "gpu_stack_roles.yml").read_text())
    for task in roles_file:
        if task["ansible.builtin.include_role"]["name"] == "gpufleet.cluster.pytorch":
            assert render("{{ %s }}" % task["when"], plan_without_torch) is False, task["name"]


def test_the_stack_record_says_torch_was_not_requested(plan_without_torch):
    record_play = yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())[2]
    variables = dict(record_play["vars"], gpu_stack_plan=plan_without_torch, inventory_hostname="gpu-a01",
                     stack_record={"converged": False}, ansible_play_hosts=[], ansible_play_hosts_all=[])
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()}
    node = Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ gpu_stack_node }}"))
    assert node["plan"]["torch"] is None
    assert node["plan"]["torch_reason"] == "not requested (torch: none): no PyTorch is installed"
    assert node["installed"]["torch"] == "not requested"
