"""Tags per component on the stack: --tags driver|cuda|nccl|pytorch runs the plan, then that role alone.

`ansible-playbook --list-tasks` does not open dynamic includes, and the stack roles are one dynamic
include on purpose (a converged node skips them all with one task). So the selection is checked in
two steps, each with Ansible's own --list-tasks: the stack playbook selects the plan and the include
for a component tag and leaves the record out; the roles file, imported statically into a play here,
selects that component's role and no other. Each role's tag also reaches its tasks (apply).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
COMPONENTS = {"driver": "nvidia_driver", "cuda": "cuda_toolkit", "nccl": "nccl", "pytorch": "pytorch"}


def list_tasks(playbook: Path, tag: str) -> list[str]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--list-tasks", "--tags", tag, str(playbook),
                           "-i", "localhost,", "-e", "gpufleet_hosts=all"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Task lines: six spaces, the name, a tab, TAGS.
    return [re.sub(r"\tTAGS: .*$", "", line).strip() for line in proc.stdout.splitlines() if "\tTAGS:" in line
            and line.startswith("      ")]


@pytest.mark.parametrize("tag", sorted(COMPONENTS))
def test_the_stack_playbook_runs_the_plan_and_the_roles_for_a_component_tag(tag):
    tasks = list_tasks(REPO / "playbooks" / "gpu_stack.yml", tag)
    # The vendor RDMA stack goes before the driver, which builds nvidia_peermem against it (tag rdma_vendor_stack).
    vendor = "Install, pin and hold the vendor RDMA stack before the driver"
    assert (vendor in tasks) is (tag == "driver")
    tasks = [task for task in tasks if task != vendor]
    assert tasks[:3] == ["Read the GPUs and NVSwitches on the PCI bus",
                         "Stop on a node without an NVIDIA GPU the solver can name", "Compute the stack plan"]
    assert "Compare the node with its last converged state" in tasks and "Run the stack roles" in tasks
    # The converged-state record and stack.json claim every role ran: a component run leaves them alone.
    assert "Write this node's record" not in tasks and "Write stack.json on the controller" not in tasks
    # The driver is what asks for reboots; the other components never do.
    assert any(t.startswith("gpufleet.cluster.reboot : ") and "Validating" not in t for t in tasks) is (tag == "driver")


@pytest.mark.parametrize("tag", sorted(COMPONENTS))
def test_the_roles_file_selects_that_components_role_alone(tag, tmp_path):
    play = tmp_path / "roles.yml"
    play.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "The stack roles", "ansible.builtin.import_tasks": str(REPO / "playbooks/tasks/gpu_stack_roles.yml")}]}]))
    tasks = list_tasks(play, tag)
    # torch's wheel index is asked before any role moves anything: part of the pytorch component.
    before = ["Ask the torch index for the planned wheels"] if tag == "pytorch" else []
    assert tasks == before + [f"Run the {COMPONENTS[tag]} role"]


def test_each_roles_tag_reaches_its_tasks():
    """An include's own tags select the include only; `apply` puts the same tag on every task of the role."""
    includes = yaml.safe_load((REPO / "playbooks/tasks/gpu_stack_roles.yml").read_text())
    found = {}
    for task in includes:
        role = task["ansible.builtin.include_role"]["name"].rsplit(".", 1)[-1]
        assert task["tags"] == task["ansible.builtin.include_role"]["apply"]["tags"], task["name"]
        found[task["tags"][0]] = role
    assert found == COMPONENTS
