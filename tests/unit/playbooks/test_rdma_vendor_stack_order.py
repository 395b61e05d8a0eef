# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The vendor RDMA stack (DOCA-OFED) is installed before the GPU driver, as nvidia_peermem requires.

nvidia_peermem is built with the driver's kernel modules against the ib_core present then, so a driver
installed before the vendor stack has a peermem built against the wrong one. site.yml is read the way
Ansible reads it (import_playbook and the playbooks' own task files followed in order), and Ansible's own
--list-tasks gives the same order. An inbox-only cluster (the default) runs nothing of the vendor step.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SECTIONS = ("pre_tasks", "roles", "tasks", "post_tasks")


def plays(path: Path):
    """(playbook file, play) in the order Ansible runs them, following import_playbook."""
    for entry in yaml.safe_load(path.read_text()):
        if "ansible.builtin.import_playbook" in entry:
            yield from plays(path.parent / entry["ansible.builtin.import_playbook"])
        else:
            yield path.name, entry


def role_runs(tasks: list, base: Path):
    """(role, tasks_from, task) for every role a list of tasks runs, following the playbooks' task files."""
    for task in tasks or []:
        if isinstance(task, dict) and "role" in task and len(task) <= 3:  # a play's roles: entry
            yield task["role"].rsplit(".", 1)[-1], "main", task
            continue
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if key in task:
                yield (task[key]["name"].rsplit(".", 1)[-1],
                       Path(task[key].get("tasks_from", "main")).stem, task)
        for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks"):
            if key in task and not str(task[key]).startswith("{{"):
                path = base / task[key]
                yield from role_runs(yaml.safe_load(path.read_text()), path.parent)
        for section in ("block", "rescue", "always"):
            yield from role_runs(task.get(section), base)


def role_order(playbook: str) -> list[tuple[str, str, dict]]:
    """(role, entry point, task) in the order the playbook runs them."""
    return [(role, entry, task) for _source, play in plays(REPO / "playbooks" / playbook) for section in SECTIONS
            for role, entry, task in role_runs(play.get(section), REPO / "playbooks")]


def first(order, role: str, entry: str) -> int:
    hits = [index for index, row in enumerate(order) if row[:2] == (role, entry)]
    assert hits, f"the playbook never runs {role} ({entry})"
    return hits[0]


def test_site_installs_the_vendor_rdma_stack_before_the_driver():
    order = role_order("site.yml")
    vendor, driver = first(order, "rdma", "vendor_stack"), first(order, "nvidia_driver", "main")
    fabric = first(order, "rdma", "main")
    assert vendor < driver, "the GPU driver is installed before the vendor RDMA stack it builds nvidia_peermem against"
    # The rest of the RDMA configuration (ports that are up, peermem) stays after the driver.
    assert driver < fabric
    # One place installs the vendor stack: fabric's rdma role only checks it.
    assert [row[1] for row in order if row[0] == "rdma"] == ["vendor_stack", "main"]


def test_gpu_stack_on_its_own_installs_the_vendor_stack_first_too():
    order = role_order("gpu_stack.yml")
    assert first(order, "rdma", "vendor_stack") < first(order, "nvidia_driver", "main")


def test_the_vendor_step_runs_only_for_a_configured_mirror_and_with_the_driver_tag():
    (task,) = [row[2] for row in role_order("gpu_stack.yml") if row[:2] == ("rdma", "vendor_stack")]
    assert task["when"] == "rdma_ofed_repo_url | default('') | length > 0"
    # --tags driver on a new node must not reach the driver without the stack it is built against.
    assert {"driver", "rdma_vendor_stack"} <= set(task["tags"])
    assert task["ansible.builtin.include_role"]["apply"]["tags"] == task["tags"]


def list_tasks(playbook: Path, *args: str) -> list[str]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--list-tasks", str(playbook), "-i", "localhost,",
                           "-e", "gpufleet_hosts=all", *args],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [re.sub(r"\tTAGS: .*$", "", line).strip() for line in proc.stdout.splitlines()
            if "\tTAGS:" in line and line.startswith("      ")]


VENDOR_TASK = "Install, pin and hold the vendor RDMA stack before the driver"


def test_ansible_lists_the_vendor_step_before_the_stack_roles_also_for_the_driver_tag():
    for args in ((), ("--tags", "driver")):
        tasks = list_tasks(REPO / "playbooks" / "site.yml", *args)
        assert tasks.index(VENDOR_TASK) < tasks.index("Run the stack roles"), args
    # The step alone (role argument checks are tagged always and listed with any tag).
    alone = list_tasks(REPO / "playbooks" / "gpu_stack.yml", "--tags", "rdma_vendor_stack")
    assert [task for task in alone if "Validating arguments" not in task] == [VENDOR_TASK]


def test_an_inbox_only_cluster_runs_nothing_of_the_vendor_step(tmp_path):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "gpu_stack.yml"),
                           "--tags", "rdma_vendor_stack", "-i", "localhost,", "-c", "local", "-e", "gpufleet_hosts=all",
                           "-e", f"ansible_python_interpreter={sys.executable}"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"TASK \[" + re.escape(VENDOR_TASK) + r"\] \*+\nskipping: \[localhost\]", out), out[-3000:]
    # Nothing reached the node (the play's fact gathering is not selected by the tag either).
    assert re.search(r"localhost +: ok=0 +changed=0 +unreachable=0 +failed=0 +skipped=1", out), out[-3000:]
