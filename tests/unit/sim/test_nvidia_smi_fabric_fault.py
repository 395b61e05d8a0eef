# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The `fabric-incomplete` fault: GPU 0 of a simulated node has not registered with the NVLink fabric.

The stand-in nvidia-smi replays the node's real capture (the HGX H100 profile's: 8 GPUs, NVSwitch, Fabric
Completed/Success) with GPU 0's Fabric section as a real B300 printed it when its fabric manager could not finish
(tests/fixtures/nvidia-smi-fabric: In Progress / N/A). What gpu_info returns from that is judged by the health
check, which must fail GPU 0 and nothing else; clearing the fault gives the capture back.
"""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.module_utils import health
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi

REPO = Path(__file__).resolve().parents[3]
STANDINS = REPO / "tests" / "sim" / "standins"
VENV_BIN = REPO / ".venv" / "bin"
sys.path.insert(0, str(REPO / "tests" / "sim"))
sys.path.insert(0, str(STANDINS))
import capture  # noqa: E402
from gfsim import hardware  # noqa: E402

H100 = hardware.FIXTURES_DIR / hardware.PROFILES["hgx-h100"]["gpu"]
B300_EXCERPT = FIXTURES / "nvidia-smi-fabric" / "b300-fabric-section-in-progress-excerpt.txt"
A100_XML = FIXTURES / "nvidia-smi-xml" / "a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml"
DRIVER = "535.183.01"


def fabric_sections(text):
    """[(state, status)] of each GPU's Fabric section, read from the text as printed."""
    _head, blocks, _tail = capture.split_gpus(text)
    found = []
    for block in blocks:
        if capture.is_xml(text):
            section = re.search(r"<fabric>\s*<state>([^<]*)</state>\s*<status>([^<]*)</status>", block)
        else:
            section = re.search(r"^\s*Fabric\s*\n\s*State\s*: (.*)\n\s*Status\s*: (.*)$", block, re.M)
        found.append(section.groups() if section else None)
    return found


def b300_state():
    """(State, Status) as the real B300 capture prints them."""
    fields = dict(map(str.strip, line.split(":", 1)) for line in B300_EXCERPT.read_text().splitlines() if ":" in line)
    return fields["State"], fields["Status"]


@pytest.fixture
def node(tmp_path):
    """A simulated HGX H100 node's tree as gfsim.hardware writes it, and the env its stand-in nvidia-smi runs in."""
    merged = tmp_path / "node1" / "merged"
    merged.mkdir(parents=True)
    hardware.write_node_hardware(merged, "node1", hardware.node_hardware("hgx-h100", {}), [])
    etc = merged / hardware.NODE_ETC
    # The capture paths in node.json are node paths (/etc/gpufleet-sim/...): point them at this tree.
    (etc / "node.json").write_text((etc / "node.json").read_text().replace('"/etc/gpufleet-sim', '"%s' % etc))
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "kernel_module").write_text(DRIVER + " proprietary\n")
    (driver / "userspace_version").write_text(DRIVER + "\n")
    env = dict(os.environ, GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_DRIVER_DIR=str(driver),
               GPUFLEET_SIM_RUN=str(tmp_path / "run"))
    return merged, env


def smi(env, *args):
    proc = subprocess.run([sys.executable, str(STANDINS / "nvidia_smi.py"), *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def fails(gpu_info):
    return [(f["code"], f.get("gpu_index"), f["counter"]) for f in health.check_gpus("node1", gpu_info)
            if f["severity"] == "fail"]


def test_the_fault_is_known_to_the_simulator():
    assert "fabric-incomplete" in hardware.GPU_FAULTS and "fabric-incomplete" in hardware.FAULTS


def test_gpu0_reads_as_the_real_b300_that_never_registered_the_rest_stay_completed():
    text = H100.read_text()
    faulted = capture.render(text, driver_version=None, cuda_version=None, faults=["fabric-incomplete"])
    assert fabric_sections(text) == [("Completed", "Success")] * 8
    assert fabric_sections(faulted) == [b300_state()] + [("Completed", "Success")] * 7
    # Exactly the two lines change, in place: the layout is the capture's.
    changed = [(a, b) for a, b in zip(text.splitlines(), faulted.splitlines()) if a != b]
    assert changed == [("        State                             : Completed",
                        "        State                             : In Progress"),
                       ("        Status                            : Success",
                        "        Status                            : N/A")]


def test_gpus_that_never_register_are_left_as_captured():
    # An HGX A100 (Ampere) reports Fabric N/A on its NVSwitch baseboard; no real one reads In Progress.
    text = A100_XML.read_text()
    assert capture.render(text, driver_version=None, cuda_version=None, faults=["fabric-incomplete"]) == text


def test_the_xml_form_edits_only_the_fabric_section_of_a_gpu_that_registers():
    # No public `nvidia-smi -q -x` of a Hopper was found: the A100 capture's schema with the state a Hopper reports
    # (Completed/Success, as the H100 text capture prints it) typed into its first GPU's fabric section.
    text = A100_XML.read_text()
    registered = re.sub(r"(<fabric>\s*<state>)N/A(</state>\s*<status>)N/A", r"\1Completed\2Success", text, count=1)
    faulted = capture.render(registered, driver_version=None, cuda_version=None, faults=["fabric-incomplete"])
    assert fabric_sections(faulted)[0] == b300_state()
    assert faulted.count("<state>") == registered.count("<state>")
    assert parse_nvidia_smi(faulted)["gpus"][0]["fabric"]["state"] == "In Progress"


def test_health_fails_gpu0_on_what_the_stand_in_prints_and_clearing_restores_the_capture(node):
    merged, env = node
    healthy = smi(env, "-q", "-x")
    hardware.set_faults(merged, ["fabric-incomplete"])
    faulted = smi(env, "-q", "-x")
    assert fabric_sections(faulted) == [b300_state()] + [("Completed", "Success")] * 7
    gpu_info = {"status": "ok", "gpus": parse_nvidia_smi(faulted)["gpus"], "nvswitch": True}
    assert fails(gpu_info) == [("FABRIC_STATE_FAILURE", 0, "fabric.state")]
    assert fails({"status": "ok", "gpus": parse_nvidia_smi(healthy)["gpus"], "nvswitch": True}) == []
    hardware.set_faults(merged, [])
    assert smi(env, "-q", "-x") == healthy
    assert fabric_sections(healthy) == fabric_sections(H100.read_text())


needs_ansible = pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")


@needs_ansible
def test_gpu_info_on_the_faulted_node_names_gpu0_for_the_health_check(node, tmp_path):
    """The module the gpu_health role runs, on the node's stand-in and PCI tree (4 NVSwitches: fabric expected)."""
    merged, env = node
    hardware.set_faults(merged, ["fabric-incomplete"])
    wrapper = tmp_path / "bin" / "nvidia-smi"
    wrapper.parent.mkdir()
    exports = "".join("export %s='%s'\n" % (k, env[k]) for k in
                      ("GPUFLEET_SIM_ETC", "GPUFLEET_SIM_DRIVER_DIR", "GPUFLEET_SIM_RUN"))
    wrapper.write_text('#!/bin/sh\n%sexec "%s" "%s" "$@"\n' % (exports, sys.executable, STANDINS / "nvidia_smi.py"))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "localhost", "-m", "gpufleet.cluster.gpu_info",
         "-a", "nvidia_smi=%s pci_sysfs_path=%s" % (wrapper, merged / hardware.PCI_TREE),
         "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python")],
        cwd=str(REPO), env=dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")),
                                ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json"),
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gpu_info = json.loads(proc.stdout.partition("=>")[2])
    assert gpu_info["status"] == "ok" and gpu_info["nvswitch"] is True
    assert health.fabric_expected(gpu_info) == "NVSwitch system with Hopper GPUs"
    assert fails(gpu_info) == [("FABRIC_STATE_FAILURE", 0, "fabric.state")]
    finding = [f for f in health.check_gpus("node1", gpu_info) if f["code"] == "FABRIC_STATE_FAILURE"][0]
    assert finding["gpu_bus_id"] == gpu_info["gpus"][0]["pci_bus_id"] == "00000000:53:00.0"
