"""The newest installed kernel is named as the boot loader orders kernels: by the OS's package rules.

Debian's grub orders kernels with dpkg --compare-versions, RHEL's BLS entries with rpm's rpmvercmp.
The driver role (kernel drift) and the reboot role (the kernel the node boots next) template their
own expressions here over a /boot listing, the way Ansible renders them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

REPO = Path(__file__).resolve().parents[3]
init_plugin_loader()
LOADER = DataLoader()


def task_var(path: str, task_name: str, var: str, variables: dict):
    tasks = LOADER.load_from_file(str(REPO / path), trusted_as_template=True)
    task = next(t for t in tasks if t.get("name") == task_name)
    expression = task["ansible.builtin.set_fact"][var]
    return Templar(loader=LOADER, variables=variables).template(trust_as_template(expression))


def boot(*kernels):
    return {"files": [{"path": f"/boot/vmlinuz-{k}"} for k in kernels]}


KERNEL_SETS = [
    # A release-candidate kernel beside numbered ones: the loose order raised TypeError comparing "rc" with 18.
    ("Debian", ("6.1.0-18-amd64", "6.1.0-rc7-amd64", "6.1.0-9-amd64"), "6.1.0-rc7-amd64"),
    ("Debian", ("6.1.0-9-amd64", "6.1.0-18-amd64"), "6.1.0-18-amd64"),
    ("RedHat", ("5.14.0-70.13.1.el9_0.x86_64", "5.14.0-362.8.1.el9_3.x86_64", "0-rescue-0123456789abcdef"),
     "5.14.0-362.8.1.el9_3.x86_64"),
]


@pytest.mark.parametrize("family, kernels, newest", KERNEL_SETS)
def test_driver_role_names_the_newest_kernel_by_the_os_rules(family, kernels, newest):
    variables = {"__nvidia_driver_kernels": boot(*kernels), "ansible_facts": {"os_family": family}}
    found = task_var("roles/nvidia_driver/tasks/configure.yml", "Record the installed driver and kernel state",
                     "nvidia_driver_newest_kernel", variables)
    assert found == newest


@pytest.mark.parametrize("newest, running, drift", [
    ("6.1.0-rc7-amd64", "6.1.0-18-amd64", True),
    ("6.1.0-18-amd64", "6.1.0-18-amd64", False),
    ("6.1.0-9-amd64", "6.1.0-18-amd64", False),
])
def test_driver_role_kernel_drift_by_dpkgs_rules(newest, running, drift):
    variables = {"nvidia_driver_newest_kernel": newest, "ansible_facts": {"os_family": "Debian", "kernel": running}}
    found = task_var("roles/nvidia_driver/tasks/configure.yml", "Record kernel drift", "nvidia_driver_kernel_drift", variables)
    assert found is drift


@pytest.mark.parametrize("family, kernels, newest", KERNEL_SETS)
def test_reboot_role_names_the_kernel_the_node_boots_next_by_the_os_rules(family, kernels, newest):
    variables = {"__reboot_kernels": boot(*kernels), "__reboot_uname": {"stdout": "6.1.0-18-amd64\n"},
                 "ansible_facts": {"os_family": family}}
    found = task_var("roles/reboot/tasks/guard.yml", "Name the kernel the node boots next (the newest installed)",
                     "__reboot_next_kernel", variables)
    assert found == newest
