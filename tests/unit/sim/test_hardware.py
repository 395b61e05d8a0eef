"""Hardware profiles as the node sees them (no simulated cluster needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parents[2] / "sim"
sys.path.insert(0, str(SIM_DIR))

from gfsim import hardware  # noqa: E402

H100 = hardware.FIXTURES_DIR / hardware.PROFILES["hgx-h100"]["gpu"]


@pytest.mark.skipif(not H100.exists(), reason=f"fixture {H100} missing")
def test_b200_profile_is_pci_ids_only_and_needs_the_open_modules(tmp_path):
    hw = hardware.node_hardware("hgx-b200", {})
    assert hw["sources"]["gpu"] is None
    hardware.write_node_hardware(tmp_path, "node1", hw, [])
    config = json.loads((tmp_path / hardware.NODE_ETC / "node.json").read_text())
    assert config["gpu_capture"] is None and config["requires_open_modules"] is True
    devices = sorted((tmp_path / hardware.PCI_TREE).iterdir())
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
