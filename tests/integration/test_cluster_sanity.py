"""The simulated cluster itself, as the other fast-tier tests rely on it: distinct reachable nodes with
systemd and a default route, isolated file systems, and a fresh node with a PCI tree but no driver.
(The simulator's own deeper behaviours, and a cold bring-up, are the full tier's: tests/full/.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import fleet as fleet_lib

pytestmark = pytest.mark.sim


def test_ping_answers_from_four_distinct_hostnames(fleet):
    ping = fleet.sim.ansible("all", "-m", "ansible.builtin.ping")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == len(fleet_lib.NODES)
    names = fleet.sim.ansible("all", "-m", "ansible.builtin.command", "-a", "hostname", "-o")
    assert names.returncode == 0, names.stdout + names.stderr
    reported = {line.split(" | ")[0]: line.rsplit(" ", 1)[1] for line in names.stdout.splitlines() if " | " in line}
    assert reported == {n: n for n in fleet_lib.NODES}


def test_node_facts_are_complete_and_systemd_runs(fleet):
    out = fleet.sim.ssh("node2", "systemctl is-system-running; ip route show default; getent hosts node3")
    lines = out.stdout.splitlines()
    assert lines[0] in ("running", "degraded"), out.stdout
    assert lines[1].startswith("default via 10.200.2.254"), out.stdout
    assert lines[2].split() == [fleet.sim.ip("node3"), "node3"]


def test_a_file_written_on_one_node_is_absent_elsewhere(fleet):
    marker = f"/root/isolation-{uuid.uuid4().hex}"
    try:
        assert fleet.sim.ssh("node1", f"echo node1 > {marker}").returncode == 0
        assert fleet.sim.ssh("node1", f"cat {marker}").stdout.strip() == "node1"
        for node in ("node2", "node3", "node4"):
            assert fleet.sim.ssh(node, f"test -e {marker}").returncode == 1
        assert not Path(marker).exists()
    finally:
        fleet.sim.ssh("node1", f"rm -f {marker}")


def test_the_fresh_node_has_no_driver_but_a_pci_tree(fleet):
    out = fleet.sim.ssh(fleet_lib.FRESH, "command -v nvidia-smi; ls /opt/gpufleet-sim/sys/bus/pci/devices | wc -l;"
                                         " cat /opt/gpufleet-sim/sys/bus/pci/devices/0000:53:00.0/device")
    assert out.stdout.split() == ["12", "0x2330"], out.stdout   # 8 H100 + 4 NVSwitch, and no nvidia-smi
