# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The vendor RDMA stack (DOCA-OFED) at the version asked, pinned and held, the way the driver's packages are.

The apt and dnf tasks are rendered the way Ansible loads the role (defaults, then vars/ for the fact set)
against a Debian and a Rocky fact set, and every module is checked to accept its arguments; the input checks
and fabric's check run for real through Ansible on this machine, where nothing is installed or held.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.template import Templar, trust_as_template
from test_stack_rhel_render import FREE_FORM, LOADER, ROLES_DIR, load, module_of, module_options, render, role_vars, walk

REPO = ROLES_DIR.parent
BIN = Path(sys.executable).parent
TASKS = ROLES_DIR / "rdma" / "tasks"
VERSION = "2.9.1-1"
FACTS = {
    "Debian": {"distribution": "Debian", "distribution_version": "12.5", "distribution_major_version": "12",
               "os_family": "Debian", "architecture": "x86_64", "kernel": "6.1.0-18-amd64"},
    "RedHat": {"distribution": "Rocky", "distribution_version": "9.3", "distribution_major_version": "9",
               "os_family": "RedHat", "architecture": "x86_64", "kernel": "5.14.0-362.8.1.el9_3.x86_64"},
}
GOOD = {"rdma_ofed_repo_url": "https://mirror.example.internal/doca/ubuntu22.04/x86_64",
        "rdma_ofed_repo_key_url": "https://mirror.example.internal/doca/GPG-KEY-Mellanox.pub",
        "rdma_ofed_repo_key_fingerprint": "A024 237B 1A4B 4D01 4B0C 0C3A 3F3E 1A5A 5B1C 4E5F",
        "rdma_ofed_version": VERSION}


def tasks_of(name: str) -> dict:
    return {task["name"]: task for task in walk(load(TASKS / name)) if "name" in task}


def templar_for(family: str, **extra) -> Templar:
    # What the repository task registered: the repository was there already.
    variables = role_vars("rdma", FACTS[family], **{**GOOD, "__rdma_ofed_repo": {"changed": False}, **extra})
    return Templar(loader=LOADER, variables=variables)


@pytest.mark.parametrize("family", sorted(FACTS))
def test_every_module_of_the_vendor_stack_accepts_its_arguments(family):
    for name in ("vendor_stack.yml", "vendor_stack_inputs.yml", "vendor_stack_check.yml", f"ofed_{family}.yml"):
        for task in walk(load(TASKS / name)):
            module = module_of(task)
            if module is None or not isinstance(task[module], dict) or module == "ansible.builtin.set_fact":
                continue
            assert module.startswith(("ansible.builtin.", "gpufleet.cluster.")), (name, task["name"])
            unknown = set(task[module]) - (FREE_FORM.get(module) or module_options(module))
            assert not unknown, f"{name}: {task['name']}: {module} has no option(s) {sorted(unknown)}"


def test_apt_installs_pins_and_holds_the_version_asked():
    templar = templar_for("Debian", rdma_ofed_packages=["doca-ofed", "mlnx-fw-updater"])
    tasks = tasks_of("ofed_Debian.yml")
    install = render(templar, tasks["Install the vendor RDMA packages at rdma_ofed_version"]["ansible.builtin.apt"])
    assert install["name"] == [f"doca-ofed={VERSION}", f"mlnx-fw-updater={VERSION}"]
    # A changed version moves the held packages (the operator asked for it).
    assert install["allow_change_held_packages"] is True
    hold = tasks["Hold the vendor RDMA packages"]
    assert hold["ansible.builtin.dpkg_selections"] == {"name": "{{ item }}", "selection": "hold"}
    assert render(templar, hold["loop"]) == ["doca-ofed", "mlnx-fw-updater"]
    pin = render(templar, tasks["Pin the vendor RDMA packages at rdma_ofed_version"]["ansible.builtin.template"])
    assert pin["dest"] == "/etc/apt/preferences.d/gpufleet-ofed"
    text = render(templar, trust_as_template((ROLES_DIR / "rdma" / "templates" / pin["src"]).read_text()))
    stanza = [line for line in text.splitlines() if not line.startswith("#")]
    assert stanza == ["Package: doca-ofed mlnx-fw-updater", f"Pin: version {VERSION}", "Pin-Priority: 1001"]


def test_dnf_installs_and_locks_the_version_asked_and_unlocks_only_another_version():
    version = "2.9.1-0.el9"
    templar = templar_for("RedHat", rdma_ofed_version=version)
    tasks = tasks_of("ofed_RedHat.yml")
    install = render(templar, tasks["Install the vendor RDMA packages at rdma_ofed_version"]["ansible.builtin.dnf"])
    assert install["name"] == [f"doca-ofed-{version}"]
    lock = tasks["Lock each vendor RDMA package"]
    assert render(templar, lock["ansible.builtin.command"], {"item": "doca-ofed"})["argv"] == [
        "dnf", "versionlock", "add", f"doca-ofed-{version}"]
    already = {"__rdma_ofed_locks": {"stdout": f"doca-ofed-0:{version}.*\n"}}
    assert render(templar, trust_as_template("{{ " + lock["when"] + " }}"), {"item": "doca-ofed", **already}) is False
    unlock = tasks["Release the version locks on the vendor packages at another version"]
    when = trust_as_template("{{ " + unlock["when"] + " }}")
    for rpm_says, wanted in ((f"doca-ofed={version}\n", False), ("package doca-ofed is not installed\n", False),
                             ("doca-ofed=2.8.0-0.el9\n", True)):
        current = {"__rdma_ofed_current": {"stdout_lines": rpm_says.splitlines()}}
        assert render(templar, when, current) is wanted, rpm_says
    # The lock list comes from the same plugin the driver and NCCL lock with.
    assert render(templar, trust_as_template("{{ __rdma_versionlock_package }}")) == "python3-dnf-plugin-versionlock"


def test_fabric_only_checks_the_vendor_stack():
    main = load(TASKS / "main.yml")
    includes = [task for task in main if "ansible.builtin.include_tasks" in task]
    assert [t["ansible.builtin.include_tasks"] for t in includes] == ["vendor_stack_check.yml"]
    assert includes[0]["when"] == "rdma_ofed_repo_url | length > 0"
    # Installing happens in one place: vendor_stack.yml, which nothing in main reaches.
    assert "ofed_{{" not in (TASKS / "main.yml").read_text()


def test_fabrics_check_wants_an_installed_hold_at_the_version_asked():
    templar = templar_for("Debian")
    fail = tasks_of("vendor_stack_check.yml")["Fail when the vendor RDMA stack is not installed and held at rdma_ofed_version"]
    unheld = trust_as_template(fail["vars"]["__rdma_ofed_unheld"])
    held = {"package": "doca-ofed", "kind": "dpkg hold", "version": VERSION, "source": "dpkg selection"}
    pin = {"package": "doca-ofed", "kind": "apt pin (version, priority 1001)", "version": VERSION, "source": "x"}
    cases = (([held], []), ([{**held, "version": "2.8.0-1"}], ["doca-ofed"]), ([pin], ["doca-ofed"]), ([], ["doca-ofed"]))
    for holds, wanted in cases:
        assert render(templar, unheld, {"__rdma_ofed_holds": {"holds": holds}}) == wanted, holds


def run_role(tmp_path: Path, tasks_from: str, extra: dict) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text(f"""
- name: Run the rdma role's {tasks_from}
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run it
      ansible.builtin.include_role:
        name: gpufleet.cluster.rdma
        tasks_from: {tasks_from}
""")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
                           "-e", json.dumps({**extra, "ansible_python_interpreter": sys.executable})],
                          capture_output=True, text=True, cwd=tmp_path, env=env, check=False, timeout=300)


@pytest.mark.parametrize("variable, value, words", [
    ("rdma_ofed_version", "", "rdma_ofed_version is '': empty"),
    ("rdma_ofed_version", "2.9.*", "rdma_ofed_version is '2.9.*': not an exact package version"),
    ("rdma_ofed_version", "latest", "rdma_ofed_version is 'latest': not an exact package version"),
    ("rdma_ofed_repo_url", "linux.mellanox.com/public/repo/doca", "rdma_ofed_repo_url is 'linux.mellanox.com/public/repo/doca': not a repository URL"),
    ("rdma_ofed_repo_url", "https://mirror.example.internal/doca ./", "rdma_ofed_repo_url is 'https://mirror.example.internal/doca ./'"),
    ("rdma_ofed_repo_key_url", "", "rdma_ofed_repo_url is set; rdma_ofed_repo_key_url (now '')"),
    ("rdma_ofed_packages", ["doca-ofed=2.9.1-1"], "rdma_ofed_packages is ['doca-ofed=2.9.1-1']: not package names: doca-ofed=2.9.1-1"),
    ("rdma_ofed_packages", [], "rdma_ofed_packages is []: empty"),
], ids=lambda value: str(value)[:24])
def test_bad_vendor_stack_input_fails_naming_the_variable_and_value_before_anything_moves(tmp_path, variable, value, words):
    run = run_role(tmp_path, "vendor_stack.yml", {**GOOD, variable: value})
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert "localhost: " + words in out, out[-3000:]
    # Nothing past the input checks ran: not even the platform's facts.
    assert "Ensure the facts the role needs are present" not in out


def test_fabric_fails_a_node_without_the_vendor_stack_and_says_to_install_it_before_the_driver(tmp_path):
    # Nothing called doca-ofed is installed on this machine; package_holds_info only reads.
    run = run_role(tmp_path, "vendor_stack_check.yml", {**GOOD, "rdma_ofed_packages": ["gpufleet-test-no-such-ofed"]})
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert (f"localhost: the vendor RDMA stack is not installed and held at rdma_ofed_version {VERSION}: "
            "gpufleet-test-no-such-ofed (holds found: none)") in out, out[-3000:]
    assert "run playbooks/gpu_stack.yml" in out and "before the GPU driver" in out
