# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""roles/nvidia_driver carries Blackwell's NVLink stack (issue 27 item 5): the stack playbook hands it the plan's
IMEX and NVLSM names, the decision installs and holds them (test_driver_decision_nvlink.py), and configure.yml
loads NVLSM's kernel module and enables the fabric manager and IMEX services. Rendered the way Ansible loads the
role (defaults, then vars/), without a node."""

from __future__ import annotations

import pytest
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from test_stack_rhel_render import LOADER, ROLES_DIR, load, render, role_vars, walk

UBUNTU = {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
          "os_family": "Debian", "architecture": "x86_64", "kernel": "5.15.0-105-generic"}
STACK_PLAYBOOK = ROLES_DIR.parent / "playbooks" / "gpu_stack.yml"


def driver_role_vars_from(plan: dict) -> dict:
    """The nvidia_driver role's variables as playbooks/gpu_stack.yml's play variables set them from a plan."""
    play_vars = load(STACK_PLAYBOOK)[0]["vars"]
    templar = Templar(loader=LOADER, variables={"gpu_stack_plan": plan})
    wanted = ("nvidia_driver_fabricmanager", "nvidia_driver_fabricmanager_packages", "nvidia_driver_imex_packages",
              "nvidia_driver_nvlsm_packages")
    return {k: render(templar, play_vars[k]) for k in wanted}


def configure_tasks():
    return {t["name"]: t for t in walk(load(ROLES_DIR / "nvidia_driver/tasks/configure.yml")) if "name" in t}


def templar_for(**role_input):
    variables = role_vars("nvidia_driver", UBUNTU, nvidia_driver_version="595.91.07", **role_input)
    return Templar(loader=LOADER, variables=variables)


def when_holds(templar, task, item=None) -> bool:
    conditions = task.get("when", [])
    conditions = conditions if isinstance(conditions, list) else [conditions]
    return all(render(templar, trust_as_template("{{ %s }}" % c), {"item": item} if item else None)
               for c in conditions)


@pytest.mark.parametrize("gpus, nvswitch, services, nvlsm", [
    (["NVIDIA B200"] * 8, True, ["nvidia-fabricmanager"], True),
    (["NVIDIA GB200"] * 4, False, ["nvidia-imex"], False),
    (["NVIDIA H100 80GB HBM3"] * 8, True, ["nvidia-fabricmanager"], False),
    (["NVIDIA L40S"], False, [], False),
])
def test_the_plan_reaches_the_role_and_names_its_services(gpus, nvswitch, services, nvlsm):
    plan = stack_plan({"cuda": "12.8"}, gpus=gpus, os="ubuntu22.04", arch="x86_64", nvswitch=nvswitch)
    wired = driver_role_vars_from(plan)
    assert wired["nvidia_driver_imex_packages"] == plan["packages"]["imex"]
    assert wired["nvidia_driver_nvlsm_packages"] == plan["packages"]["nvlsm"]
    templar = templar_for(**wired)
    assert render(templar, trust_as_template("{{ __nvidia_driver_fabric_services }}")) == services
    # The decision sees the new names: detection lists them, the plan hands them over.
    queried = render(templar, trust_as_template("{{ __nvidia_driver_query_names }}"))
    assert set(plan["packages"]["imex"] + plan["packages"]["nvlsm"]) <= set(queried)
    role_plan = render(templar, trust_as_template("{{ __nvidia_driver_plan }}"))
    assert role_plan["imex_packages"] == plan["packages"]["imex"] and role_plan["nvlsm_packages"] == plan["packages"]["nvlsm"]
    tasks = configure_tasks()
    assert when_holds(templar, tasks["Load the NVLink Subnet Manager's kernel modules at boot"]) is nvlsm


def test_services_are_enabled_and_started_once_the_driver_answers():
    task = configure_tasks()["Enable fabric manager and IMEX"]
    assert task["loop"] == "{{ __nvidia_driver_fabric_services }}"
    templar = templar_for(nvidia_driver_fabricmanager=True, nvidia_driver_imex_packages=["nvidia-imex"])
    smi_ok = {"__nvidia_driver_smi": {"rc": 0}, "item": "nvidia-imex"}
    args = render(templar, task["ansible.builtin.systemd_service"], smi_ok)
    assert args == {"name": "nvidia-imex", "enabled": True, "state": "started"}
    listed = {"__nvidia_driver_units": {"stdout": "nvidia-imex.service enabled enabled\n"}}
    assert when_holds(templar.copy_with_new_env(available_variables={**templar.available_variables, **listed}),
                      task, "nvidia-imex")
    units = render(templar, configure_tasks()["List the systemd units the driver packages ship"]["ansible.builtin.command"])
    assert units["argv"][-2:] == ["nvidia-fabricmanager.service", "nvidia-imex.service"]


def test_nvlsm_kernel_modules_file_and_load_follow_the_compat_data():
    templar = templar_for(nvidia_driver_nvlsm_packages=["nvlsm"])
    assert render(templar, trust_as_template("{{ __nvidia_driver_nvlsm_kernel_modules }}")) == \
        data.NVLSM_PACKAGES["kernel_modules"]
    text = (ROLES_DIR / "nvidia_driver/templates/etc/modules-load.d/gpufleet-nvlsm.conf.j2").read_text()
    rendered = render(templar, trust_as_template(text))
    assert rendered.startswith("#") and "\nib_umad\n" in rendered
    load_now = configure_tasks()["Load the NVLink Subnet Manager's kernel modules now"]
    loaded = {"__nvidia_driver_proc_modules": {"stdout": "ib_umad 45056 0 - Live 0x0000000000000000\n"}}
    missing = {"__nvidia_driver_proc_modules": {"stdout": "mlx5_ib 471040 0 - Live 0x0000000000000000\n"}}
    for registered, runs in ((loaded, False), (missing, True)):
        env = templar.copy_with_new_env(available_variables={**templar.available_variables, **registered})
        assert when_holds(env, load_now, "ib_umad") is runs
    assert render(templar, load_now["ansible.builtin.command"], {"item": "ib_umad"})["argv"] == ["modprobe", "ib_umad"]


def test_an_nvlsm_module_that_cannot_load_now_is_reported_not_fatal():
    # Seen on the simulated HGX B200 (tests/full/test_nvlink5.py): no /proc/modules and no module loading there;
    # the boot file still loads ib_umad before the fabric manager starts NVLSM.
    tasks = configure_tasks()
    assert tasks["Read the loaded kernel modules"]["failed_when"] is False
    assert tasks["Load the NVLink Subnet Manager's kernel modules now"]["failed_when"] is False
    report = tasks["Report the NVLink Subnet Manager's kernel modules that could not be loaded now"]
    templar = templar_for(nvidia_driver_nvlsm_packages=["nvlsm"])
    failed = {"item": "ib_umad", "rc": 1, "stderr": "modprobe: FATAL: Module ib_umad not found\n"}
    assert when_holds(templar, report, failed) is True
    assert when_holds(templar, report, {"item": "ib_umad", "rc": 0, "stderr": ""}) is False
    msg = render(templar, report["ansible.builtin.debug"], {"item": failed, "inventory_hostname": "node1"})["msg"]
    assert msg.startswith("WARNING node1: ib_umad could not be loaded now (modprobe: FATAL: Module ib_umad not found)")
    assert "loads it at boot" in msg and "cannot start NVLSM" in msg


def test_the_knobs_are_declared_with_their_defaults():
    spec = load(ROLES_DIR / "nvidia_driver/meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(ROLES_DIR / "nvidia_driver/defaults/main.yml")
    for knob, default in (("nvidia_driver_imex_packages", []), ("nvidia_driver_nvlsm_packages", []),
                          ("nvidia_driver_nvlsm_version", "")):
        assert defaults[knob] == default and spec[knob]["default"] == default
