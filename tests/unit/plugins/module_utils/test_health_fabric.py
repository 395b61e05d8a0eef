# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The NVLink fabric verdict on Hopper/Blackwell NVSwitch and NVL72 nodes (issue 27 item 5): Completed/Success
passes; any other state fails; where the GPUs must register, a GPU that reports no state (or N/A) fails too.

Built from real captures: the HGX H100 `nvidia-smi -q` (8 GPUs, NVSwitch, Fabric Completed/Success), the HGX A100
XML (NVSwitch, Fabric N/A: Ampere does not register), and the B300 Fabric section of a public troubleshooting note
(In Progress / N/A), spliced into the H100 capture's GPU block because no full Blackwell capture is public
(tests/fixtures/SOURCES.md)."""

import pytest

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.module_utils import health
from test_health import H100X8, edited, gpu_info_from, gpu_info_from_text, read

A100_NVSWITCH = "nvidia-smi-xml/a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml"
B300_EXCERPT = "nvidia-smi-fabric/b300-fabric-section-in-progress-excerpt.txt"
H100_FABRIC = "    Fabric\n        State                             : Completed\n        Status                            : Success\n"


def b300_section() -> str:
    """The B300 capture's three lines at the section depth of a full `nvidia-smi -q` (one level in)."""
    return "".join("    " + line for line in (FIXTURES / B300_EXCERPT).read_text().splitlines(keepends=True))


def codes(gpu_info, gpu=None):
    return [f["code"] for f in health.check_gpus("n", gpu_info)
            if f["code"].startswith("FABRIC") and (gpu is None or f.get("gpu_index") == gpu)]


def as_node(gpu_info, nvswitch=True, model=None):
    gpu_info["nvswitch"] = nvswitch
    for g in gpu_info["gpus"]:
        if model:
            g["model"], g["architecture"] = model, "Blackwell"
    return gpu_info


def test_the_hgx_h100_capture_passes_on_its_nvswitch_node():
    info = as_node(gpu_info_from(H100X8))
    assert health.fabric_expected(info) == "NVSwitch system with Hopper GPUs"
    assert codes(info) == []


def test_the_b300_in_progress_state_fails_the_gpu_that_reports_it():
    text = edited(H100X8, H100_FABRIC, b300_section(), gpu=3)
    info = as_node(gpu_info_from_text(text), model="b300")
    assert info["gpus"][3]["fabric"]["state"] == "In Progress"
    found = [f for f in health.check_gpus("n", info) if f["code"].startswith("FABRIC")]
    assert [(f["code"], f["gpu_index"], f["severity"]) for f in found] == [("FABRIC_STATE_FAILURE", 3, "fail")]
    assert found[0]["value"].startswith("In Progress/")


FABRIC_N_A = ("    Fabric\n        State                             : N/A\n"
              "        Status                            : N/A\n")


@pytest.mark.parametrize("replacement", ["", FABRIC_N_A])
def test_a_gpu_without_a_fabric_state_fails_where_it_must_register(replacement):
    info = as_node(gpu_info_from_text(edited(H100X8, H100_FABRIC, replacement, gpu=6)))
    assert codes(info, 6) == ["FABRIC_STATE_MISSING"]
    assert all(not codes(info, i) for i in range(8) if i != 6)
    # Without NVSwitch (a PCIe H100, say) nothing says the GPU registers: not judged.
    assert codes(as_node(gpu_info_from_text(edited(H100X8, H100_FABRIC, replacement, gpu=6)), nvswitch=False)) == []


def test_nvl72_gpus_must_register_though_the_node_sees_no_nvswitch():
    text = read(H100X8).replace(H100_FABRIC, "")
    info = as_node(gpu_info_from_text(text), nvswitch=False, model="gb200")
    assert health.fabric_expected(info) == "multi-node NVLink GPUs (gb200)"
    assert codes(info) == ["FABRIC_STATE_MISSING"] * 8


def test_an_hgx_a100_with_fabric_n_a_is_not_failed():
    info = as_node(gpu_info_from(A100_NVSWITCH))
    assert {g["fabric"] is None or g["fabric"]["state"] == "N/A" for g in info["gpus"]} == {True}
    assert health.fabric_expected(info) == "" and codes(info) == []
