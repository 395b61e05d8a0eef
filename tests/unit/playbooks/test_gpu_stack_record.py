"""The stack record (local fact gpufleet_stack and stack.json) describes the node, not the run.

Molecule's idempotence step found that the second converge after the first one and its reboot
rewrote the fact: the record carried what the run did (driver install, then keep) and the reasons of
a reboot already done. These tests render the playbook's own record expression with the variables
each run leaves behind.
"""

from __future__ import annotations

from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar

PLAYBOOK = Path(__file__).resolve().parents[3] / "playbooks" / "gpu_stack.yml"

init_plugin_loader()
LOADER = DataLoader()
RECORD_PLAY = next(p for p in LOADER.load_from_file(str(PLAYBOOK), trusted_as_template=True)
                   if p.get("name") == "Record the installed stack")

PLAN = {"cuda_version": "12.2", "driver_branch": "535", "driver_min_version": "535.104.05",
        "kernel_modules": "open", "nccl_package_version": "2.18.3-1+cuda12.2", "packages": {"fabricmanager": ["x"]},
        "torch": {"version": "2.13.0", "variant": "cpu"}, "repository": "debian12/x86_64", "warnings": []}
INSTALLED = {"nvidia_driver_installed_version": "535.183.01", "cuda_toolkit_installed": ["12.2"],
             "cuda_toolkit_default_version": "12.2", "nccl_installed_version": "2.18.3-1+cuda12.2",
             "pytorch_installed": {"version": "2.13.0+cpu"}, "nvidia_driver_secure_boot": "disabled",
             "nvidia_driver_kernel_drift": False,
             "gpu_stack_loaded": {"stdout": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.183.01  Release"}}
REASONS = ["nvidia_driver: driver 535.183.01 installed; load it with a reboot", "nvidia_driver: nouveau blacklisted"]


def record(**run_vars) -> dict:
    variables = {"inventory_hostname": "node1", "gpu_stack_plan": PLAN, **INSTALLED, **run_vars}
    templar = Templar(loader=LOADER, variables=variables)
    return templar.template(RECORD_PLAY["vars"]["gpu_stack_node"])


def test_first_run_with_its_reboot_and_the_second_run_record_the_same():
    first = record(nvidia_driver_action="install", reboot_reasons=REASONS, reboot_required=False)
    second = record(nvidia_driver_action="keep", reboot_reasons=[], reboot_required=False)
    assert first == second
    assert first["installed"]["driver"] == "535.183.01" and first["installed"]["driver_loaded"] == "535.183.01"
    assert first["reboot_required"] is False and first["reboot_reasons"] == []


def test_a_pending_reboot_keeps_its_reasons():
    pending = record(nvidia_driver_action="install", reboot_reasons=REASONS, reboot_required=True)
    assert pending["reboot_required"] is True and pending["reboot_reasons"] == REASONS
    # The next run, still not allowed to reboot, sees the same requests: the same record.
    assert record(nvidia_driver_action="keep", reboot_reasons=REASONS, reboot_required=True) == pending


def test_a_converged_node_that_skipped_the_roles_writes_the_same_record():
    """The skip path takes what the roles reported, and the loaded driver, from the converged-state
    record (the probe returns it as stack_record.installed): stack.json must not change."""
    full = record(nvidia_driver_action="keep", reboot_reasons=[], reboot_required=False)
    state = {"converged": True, "installed": full["installed"]}
    # Nothing the roles set is there: they did not run.
    variables = {"inventory_hostname": "node1", "gpu_stack_plan": PLAN, "stack_record": state}
    templar = Templar(loader=LOADER, variables=variables)
    converged = templar.template(RECORD_PLAY["vars"]["gpu_stack_node"])
    assert converged == full
    # A node that ran the roles reports what they set, not an older record.
    stale = {"converged": False, "installed": {**full["installed"], "driver": "535.154.05"}}
    ran = record(nvidia_driver_action="keep", reboot_reasons=[], reboot_required=False, stack_record=stale)
    assert ran["installed"]["driver"] == "535.183.01"
