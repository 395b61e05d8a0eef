# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""roles/gpu_diagnostics installs the plan's DCGM 4 (issue 27 item 6): playbooks/validate.yml hands it the plan's
packages.dcgm and dcgm_version, the install tasks ask for exactly those names at that version and hold them (apt:
dpkg_selections, dnf: versionlock, as nvidia_driver and nccl do), DCGM 3's package goes in the same transaction and
the host engine is restarted when the package changed. Rendered the way Ansible loads the role, without a node."""

from __future__ import annotations

import pytest
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
from test_stack_rhel_render import FACTS, LOADER, ROLES_DIR, load, module_of, module_options, render, role_vars, walk

UBUNTU = {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
          "os_family": "Debian", "architecture": "x86_64", "kernel": "5.15.0-105-generic"}
VALIDATE = ROLES_DIR.parent / "playbooks" / "validate.yml"
TASKS = ROLES_DIR / "gpu_diagnostics" / "tasks"


def diagnostics_play() -> dict:
    return next(p for p in load(VALIDATE) if p["name"] == "Run the GPU diagnostics")


def wired_from(plan: dict | None, **inventory) -> dict:
    """gpu_diagnostics_packages / _package_version as the validate play's variables set them from a plan (None:
    the plan could not be computed on the node)."""
    play_vars = diagnostics_play()["vars"]
    templar = Templar(loader=LOADER, variables={**({"gpu_stack_plan": plan} if plan else {}), **inventory})
    return {k: render(templar, v) for k, v in play_vars.items()}


def tasks_by_name(filename: str) -> dict:
    return {t["name"]: t for t in walk(load(TASKS / filename)) if "name" in t}


def templar_for(facts: dict, **extra) -> Templar:
    return Templar(loader=LOADER, variables=role_vars("gpu_diagnostics", facts, **extra))


def test_the_validate_play_plans_and_hands_over_the_dcgm_packages():
    play = diagnostics_play()
    assert play["gather_facts"] is True
    assert any(t.get("ansible.builtin.import_tasks") == "tasks/gpu_stack_plan.yml"
               for t in walk(play["pre_tasks"]))
    plan = stack_plan({"cuda": "12.8"}, gpus=["NVIDIA H100 80GB HBM3"], os="ubuntu22.04", arch="x86_64", nvswitch=False)
    wired = wired_from(plan)
    assert wired == {"gpu_diagnostics_packages": ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"],
                     "gpu_diagnostics_package_version": "1:4.6.0-1"}
    assert wired_from(plan, gpufleet_dcgm_version="1:4.4.0-1")["gpu_diagnostics_package_version"] == "1:4.4.0-1"
    plan13 = stack_plan({"cuda": "13.0"}, gpus=["NVIDIA H100 80GB HBM3"], os="ubuntu24.04", arch="x86_64", nvswitch=False)
    assert wired_from(plan13)["gpu_diagnostics_packages"][-1] == "datacenter-gpu-manager-4-cuda13"


def test_a_plan_without_dcgm_hands_over_nothing_to_install():
    plan = {"packages": {"dcgm": []}, "dcgm_version": None}
    assert wired_from(plan) == {"gpu_diagnostics_packages": [], "gpu_diagnostics_package_version": ""}
    assert wired_from(None) == {"gpu_diagnostics_packages": [], "gpu_diagnostics_package_version": ""}
    assert any("rescue" in t for t in diagnostics_play()["pre_tasks"])  # an unplannable node still runs its checks
    main = tasks_by_name("main.yml")["Install DCGM and start its host engine"]
    templar = templar_for(UBUNTU, gpu_diagnostics_packages=[])
    assert not all(render(templar, trust_as_template("{{ %s }}" % c)) for c in main["when"])


def test_apt_installs_the_planned_names_at_the_version_and_holds_them():
    pkgs = ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"]
    templar = templar_for(UBUNTU, gpu_diagnostics_packages=pkgs, gpu_diagnostics_package_version="1:4.5.2-1")
    tasks = tasks_by_name("install_Debian.yml")
    install = render(templar, tasks["Install DCGM at the planned version"]["ansible.builtin.apt"])
    assert install["name"] == ["datacenter-gpu-manager-4-core=1:4.5.2-1", "datacenter-gpu-manager-4-cuda12=1:4.5.2-1"]
    assert install["state"] == "present" and install["allow_change_held_packages"] is True
    hold = tasks["Hold DCGM at the planned version"]
    assert render(templar, hold["loop"]) == pkgs
    assert render(templar, hold["ansible.builtin.dpkg_selections"], {"item": pkgs[1]}) == {
        "name": pkgs[1], "selection": "hold"}


def test_dnf_installs_erasing_dcgm3_and_locks_at_the_version():
    pkgs = ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"]
    templar = templar_for(FACTS["rocky9"], gpu_diagnostics_packages=pkgs, gpu_diagnostics_package_version="4.5.2-1")
    tasks = tasks_by_name("install_RedHat.yml")
    install = render(templar, tasks["Install DCGM at the planned version"]["ansible.builtin.dnf"])
    assert install["name"] == ["datacenter-gpu-manager-4-core-4.5.2-1", "datacenter-gpu-manager-4-cuda12-4.5.2-1"]
    assert install["allowerasing"] is True
    lock = tasks["Lock each DCGM package"]
    assert render(templar, lock["ansible.builtin.command"], {"item": pkgs[0]})["argv"] == [
        "dnf", "versionlock", "add", "datacenter-gpu-manager-4-core-4.5.2-1"]
    listed = {"__gpu_diagnostics_locks": {"stdout": "datacenter-gpu-manager-4-core-1:4.5.2-1.*\n"}, "item": pkgs[0]}
    assert render(templar, trust_as_template("{{ %s }}" % lock["when"]), listed) is False
    unlock = render(templar, tasks["Release the version locks on DCGM when the plan moved it"]["ansible.builtin.command"])
    assert unlock["argv"][-1] == "datacenter-gpu-manager"  # DCGM 3's lock would stop allowerasing


@pytest.mark.parametrize("changed, state", [(True, "restarted"), (False, "started")])
def test_the_host_engine_restarts_only_when_the_package_changed(changed, state):
    templar = templar_for(UBUNTU)
    task = tasks_by_name("service.yml")["Start the DCGM host engine"]
    args = render(templar, task["ansible.builtin.systemd_service"], {"__gpu_diagnostics_install": {"changed": changed}})
    assert args == {"name": "nvidia-dcgm", "state": state, "enabled": True, "daemon_reload": changed}


def test_packages_without_a_version_stop_with_the_variable_named():
    task = tasks_by_name("main.yml")["Check that the DCGM packages come with their version"]
    templar = templar_for(UBUNTU, gpu_diagnostics_packages=["datacenter-gpu-manager-4-core"])
    assert all(render(templar, trust_as_template("{{ %s }}" % c)) for c in task["when"])
    assert render(templar, trust_as_template("{{ %s }}" % task["ansible.builtin.assert"]["that"])) is False
    msg = render(templar, task["ansible.builtin.assert"]["fail_msg"])
    assert "gpu-r01" in msg and "gpu_diagnostics_package_version is empty" in msg and "1:4.6.0-1" in msg


@pytest.mark.parametrize("filename", ["install_Debian.yml", "install_RedHat.yml", "service.yml", "main.yml"])
def test_every_module_accepts_its_arguments(filename):
    for task in walk(load(TASKS / filename)):
        module = module_of(task)
        args = task.get(module)
        if module in (None, "ansible.builtin.set_fact") or not isinstance(args, dict) or not module.startswith("ansible.builtin."):
            continue
        if module == "ansible.builtin.command":
            continue
        assert not set(args) - module_options(module), (filename, task["name"])


def test_the_knobs_are_declared_with_their_defaults():
    spec = load(ROLES_DIR / "gpu_diagnostics/meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(ROLES_DIR / "gpu_diagnostics/defaults/main.yml")
    for knob in ("gpu_diagnostics_packages", "gpu_diagnostics_package_version", "gpu_diagnostics_hold",
                 "gpu_diagnostics_replace_packages", "gpu_diagnostics_install_timeout", "gpu_diagnostics_command_timeout"):
        assert spec[knob]["default"] == defaults[knob], knob
    assert "gpu_diagnostics_package" not in defaults  # DCGM 3's unpinned name is gone
    assert defaults["gpu_diagnostics_level"] == 2  # validate runs level 2
