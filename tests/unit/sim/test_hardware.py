"""Hardware profiles as the node sees them (no simulated cluster needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parents[2] / "sim"
sys.path.insert(0, str(SIM_DIR))

from gfsim import hardware  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils.pci import scan_nvidia_pci  # noqa: E402

H100 = hardware.FIXTURES_DIR / hardware.PROFILES["hgx-h100"]["gpu"]


@pytest.mark.skipif(not H100.exists(), reason=f"fixture {H100} missing")
def test_b200_profile_is_pci_ids_only_and_needs_the_open_modules(tmp_path):
    hw = hardware.node_hardware("hgx-b200", {})
    assert hw["sources"]["gpu"] is None
    hardware.write_node_hardware(tmp_path, "node1", hw, [])
    config = json.loads((tmp_path / hardware.NODE_ETC / "node.json").read_text())
    assert config["gpu_capture"] is None and config["requires_open_modules"] is True
    devices = sorted(d for d in (tmp_path / hardware.PCI_TREE).iterdir() if (d / "vendor").read_text().strip() == "0x10de")
    assert len(devices) == 8
    assert {(d / "device").read_text().strip() for d in devices} == {"0x2901"}
    assert {(d / "class").read_text().strip() for d in devices} == {"0x030200"}
    # The bus addresses are the HGX H100 capture's (board layout), as the docs say.
    h100 = tmp_path / "h100"
    hardware.write_node_hardware(h100, "node1", hardware.node_hardware("hgx-h100", {}), [])
    h100_gpus = sorted(d.name for d in (h100 / hardware.PCI_TREE).iterdir()
                       if (d / "class").read_text().strip() == "0x030200")
    assert [d.name for d in devices] == h100_gpus


def test_h100_profile_does_not_require_open_modules(tmp_path):
    if not H100.exists():
        pytest.skip(f"fixture {H100} missing")
    hardware.write_node_hardware(tmp_path, "node1", hardware.node_hardware("hgx-h100", {}), [])
    config = json.loads((tmp_path / hardware.NODE_ETC / "node.json").read_text())
    assert config["requires_open_modules"] is False and config["gpu_capture"].endswith(".txt")


def test_every_fault_is_in_the_documented_fault_table():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "simulated-cluster.md").read_text()
    table = doc.split("## Faults", 1)[1].split("\n## ", 1)[0]
    documented = {name for row in table.splitlines() if row.startswith("| `")
                  for name in row.split("|")[1].replace("`", "").replace(" ", "").split("/")}
    assert set(hardware.FAULTS) == documented


@pytest.mark.skipif(not H100.exists(), reason=f"fixture {H100} missing")
def test_b200_node_shows_its_nvswitches_through_the_cx7_bridge_lpfs(tmp_path):
    # FM guide 2.3 §1.3.2: no NVSwitch PCI function; two bridge ports, each a full PF and a Limited PF,
    # the LPFs marked SMDL=SW_MNG in their VPD. gpu_info's own scan must see an NVSwitch system in it.
    hardware.write_node_hardware(tmp_path, "node1", hardware.node_hardware("hgx-b200", {}), [])
    tree = tmp_path / hardware.PCI_TREE
    cx7 = sorted(d for d in tree.iterdir() if (d / "vendor").read_text().strip() == "0x15b3")
    assert [(d / "device").read_text().strip() for d in cx7] == ["0x1021"] * 4
    assert [b"SMDL=SW_MNG" in (d / "vpd").read_bytes() for d in cx7] == [False, True, False, True]
    found = scan_nvidia_pci(str(tree))
    assert [d["kind"] for d in found].count("gpu") == 8
    assert [d["sysfs_name"] for d in found if d["kind"] == "nvswitch_bridge"] == ["0000:e0:00.1", "0000:e1:00.1"]
    assert not [d for d in found if d["kind"] == "nvswitch"]


@pytest.mark.skipif(not H100.exists(), reason=f"fixture {H100} missing")
def test_h100_node_keeps_its_nvswitch_pci_functions_and_no_bridge(tmp_path):
    hardware.write_node_hardware(tmp_path, "node1", hardware.node_hardware("hgx-h100", {}), [])
    found = scan_nvidia_pci(str(tmp_path / hardware.PCI_TREE))
    assert [d["kind"] for d in found].count("nvswitch") == 4
    assert not [d for d in found if d["kind"] == "nvswitch_bridge"]
