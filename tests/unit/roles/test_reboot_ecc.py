# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""ECC that validate enables takes effect in the same run: one batched reboot of those nodes, then health again.

The request is the gpu_health role's own decision, rendered here the way Ansible loads the role; the order of
the plays is read from playbooks/validate.yml and from Ansible's --list-tasks; the batches run for real in
check mode against the reboot role's stand-ins (tests/unit/roles/test_reboot_safety.py), where nothing reboots.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from test_reboot_safety import Node, run
from test_stack_rhel_render import LOADER, ROLES_DIR, load, render, role_vars, walk

REPO = ROLES_DIR.parent
BIN = Path(sys.executable).parent
VALIDATE = REPO / "playbooks" / "validate.yml"
DEBIAN = {"distribution": "Debian", "distribution_major_version": "12", "os_family": "Debian"}


def gpu(bus: str, current: str, pending: str) -> dict:
    return {"pci_bus_id": bus, "ecc_mode": {"current": current, "pending": pending}}


@pytest.mark.parametrize("enable, gpus, wanted", [
    (True, [gpu("00000000:18:00.0", "disabled", "enabled"), gpu("00000000:2A:00.0", "enabled", "enabled")], True),
    (True, [gpu("00000000:18:00.0", "enabled", "enabled")], False),
    # nvidia-smi -e 1 failed: pending is still Disabled, a reboot would change nothing.
    (True, [gpu("00000000:18:00.0", "disabled", "disabled")], False),
    # Pending Disabled on a GPU running with ECC: not gpufleet's change, never a reason to reboot for ECC.
    (True, [gpu("00000000:18:00.0", "enabled", "disabled")], False),
    # An audit (the default) never asks for a reboot, even with a change someone else left pending.
    (False, [gpu("00000000:18:00.0", "disabled", "enabled")], False),
    (True, [], False),
])
def test_the_reboot_is_requested_only_when_ecc_pending_differs_from_current(enable, gpus, wanted):
    variables = role_vars("gpu_health", DEBIAN, gpu_health_ecc_enable=enable,
                          __gpu_health_gpu={"gpus": gpus}, __gpu_health_gpu_after={"skipped": True})
    templar = Templar(loader=LOADER, variables=variables)
    assert render(templar, trust_as_template("{{ __gpu_health_ecc_reboot_wanted | bool }}")) is wanted


def test_the_request_the_result_and_the_reboot_all_follow_that_one_decision():
    remediate = {t["name"]: t for t in walk(load(ROLES_DIR / "gpu_health/tasks/remediate.yml"))}
    assert remediate["Request the batched reboot for the pending ECC mode"]["when"] == "__gpu_health_ecc_reboot_wanted | bool"
    published = next(t for t in load(ROLES_DIR / "gpu_health/tasks/evaluate.yml") if t["name"] == "Publish the node's health result")
    assert "'ecc_reboot_requested': __gpu_health_ecc_reboot_wanted | bool" in published["ansible.builtin.set_fact"]["gpu_health_result"]
    reboot = next(p for p in yaml.safe_load(VALIDATE.read_text()) if p.get("ansible.builtin.import_playbook") == "reboot.yml")
    assert reboot["when"] == "gpu_health_result.ecc_reboot_requested | default(false) | bool"
    assert reboot["vars"] == {"gpufleet_reboot_group": "gpufleet_ecc_reboot_requested"}


def test_validate_checks_health_then_reboots_for_ecc_then_checks_again():
    plays = yaml.safe_load(VALIDATE.read_text())
    names = [p["name"] for p in plays]
    health = names.index("Check GPU node health")
    reboot = names.index("Reboot the nodes whose ECC mode validate changed, once, in batches")
    again = names.index("Check GPU node health again after the ECC reboot")
    assert health < reboot < again < names.index("Run the GPU diagnostics")
    # The same health tasks both times; the second time only once a node was rebooted for ECC.
    (first,), (second,) = plays[health]["tasks"], plays[again]["tasks"]
    assert first["ansible.builtin.import_tasks"] == second["ansible.builtin.import_tasks"] == "tasks/validate_health.yml"
    assert "when" not in first and second["when"] == "validate_ecc_rebooted | length > 0"
    # A node rebooted for ECC whose GPU is still pending fails the second time (ECC_ENABLE_NOT_APPLIED).
    assert "vars" not in first
    assert second["vars"] == {"gpu_health_ecc_pending_fails": "{{ inventory_hostname in validate_ecc_rebooted }}"}
    assert plays[reboot]["tags"] == plays[health]["tags"] == plays[again]["tags"] == ["health"]


def test_ansible_runs_the_ecc_reboot_between_the_two_health_checks():
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--list-tasks", "--tags", "health", str(VALIDATE),
                           "-i", "localhost,", "-e", "gpufleet_hosts=all"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = [re.sub(r"\tTAGS: .*$", "", line).strip() for line in proc.stdout.splitlines() if "\tTAGS:" in line]
    evaluations = [i for i, t in enumerate(tasks) if t == "gpufleet.cluster.gpu_health : Evaluate the node's health"]
    reboots = [i for i, t in enumerate(tasks) if t == "gpufleet.cluster.reboot : Reboot the node"]
    assert len(evaluations) == 2 and len(reboots) == 1, tasks
    assert evaluations[0] < reboots[0] < evaluations[1]


def test_the_role_hands_the_strict_pending_check_to_the_evaluation():
    variables = role_vars("gpu_health", DEBIAN, gpu_health_ecc_pending_fails="true")
    templar = Templar(loader=LOADER, variables=variables)
    assert render(templar, trust_as_template("{{ __gpu_health_thresholds.ecc_pending_fails }}")) is True
    assert load(ROLES_DIR / "gpu_health/defaults/main.yml")["gpu_health_ecc_pending_fails"] is False


def test_the_recheck_names_the_ecc_nodes_whose_reboot_is_done():
    rebooted = yaml.safe_load(VALIDATE.read_text())
    rebooted = next(p for p in rebooted if p.get("name") == "Check GPU node health again after the ECC reboot")
    expr = trust_as_template(rebooted["vars"]["validate_ecc_rebooted"])
    hostvars = {"node1": {"inventory_hostname": "node1", "reboot_required": False},   # rebooted for ECC
                "node2": {"inventory_hostname": "node2", "reboot_required": True},    # gpufleet_reboot_ok was false
                "node3": {"inventory_hostname": "node3", "reboot_required": False}}   # no ECC change: not in the group
    templar = Templar(loader=LOADER, variables={"groups": {"gpufleet_ecc_reboot_requested": ["node1", "node2"]},
                                                "hostvars": hostvars})
    assert render(templar, expr) == ["node1"]
    assert render(templar.copy_with_new_env(available_variables={"groups": {}, "hostvars": hostvars}), expr) == []


def test_only_the_nodes_whose_ecc_changed_enter_the_reboot_batches(tmp_path):
    """node1 has a request of its own left over and was grouped by the stack's reboot earlier in the run; neither
    puts it in the ECC batches (it comes first, so a batch of its own would show). node2's ECC changed: it goes
    through the reboot role's guard to the reboot."""
    plays = yaml.safe_load(VALIDATE.read_text())
    imported = next(p for p in plays if p.get("ansible.builtin.import_playbook") == "reboot.yml")
    nodes = {"node1": Node(tmp_path / "node1"), "node2": Node(tmp_path / "node2", request=False)}
    (nodes["node2"].root / "requests" / "ecc-mode").write_text("ECC mode enabled, pending until reboot, on GPU(s) 0\n")
    play = tmp_path / "validate-ecc.yml"
    play.write_text(yaml.safe_dump([
        {"name": "Stand in for the health play", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [
            {"name": "Publish the health result", "ansible.builtin.set_fact": {
                "gpu_health_result": {"ecc_reboot_requested": "{{ inventory_hostname == 'node2' }}"}}},
            {"name": "Stand in for the stack's reboot group", "ansible.builtin.group_by": {"key": "gpufleet_reboot_requested"},
             "changed_when": False}]},
        {**imported, "ansible.builtin.import_playbook": str(REPO / "playbooks" / "reboot.yml")}]))
    result = run(tmp_path, nodes, play, "--check", "-e", json.dumps({"gpufleet_reboot_ok": "true"}))
    assert "--check" in result.args  # the play would reboot this machine otherwise
    batched = result.out.split("PLAY [Reboot the nodes that need it, once]")[1:]
    assert len(batched) == 1, result.out[-4000:]
    assert "[node1]" not in batched[0].split("PLAY RECAP")[0], result.out[-4000:]
    read = re.search(r"TASK \[gpufleet.cluster.reboot : Read why the node needs a reboot\] \*+\n((?:ok: .*\n)+)", batched[0])
    assert read and re.findall(r"ok: \[(node\d)\] => \(item=.*/(\S+)\)", read.group(1)) == [("node2", "ecc-mode")], batched[0]
    # node2 passed every check and got as far as the reboot, which ansible.builtin.reboot refuses over a local
    # connection even in check mode ("would reboot the control node").
    assert re.search(r"TASK \[gpufleet.cluster.reboot : Reboot the node\] \*+\n\[ERROR\]: [^\n]*would reboot the control node",
                     batched[0]), result.out[-4000:]
    assert "fatal: [node2]" in batched[0].split("TASK [gpufleet.cluster.reboot : Reboot the node]")[1]
