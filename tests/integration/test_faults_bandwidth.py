"""Bandwidth isolation names the node with the slow link, and only that node.

node3's egress is shaped to 10 Mbit/s (`link-slow`, a token bucket on its eth0): more than 100x slower
than an unshaped veth on these machines, far beyond the run-to-run noise of shared CPUs (about 2x). The
threshold matches the fault: a node is slow below 1/20 of the group's median, so noise never names a
healthy node and the fault always names node3.
"""

from __future__ import annotations

import json

import pytest

from simharness import REPO_ROOT, recap

pytestmark = pytest.mark.sim
# The shaped link's figure is below this whatever the load (10 Mbit/s = 0.01 Gb/s; shaping only caps it).
SHAPED_GBPS_CEILING = 0.05
FLOOR_FRACTION = 0.05


def test_the_slow_node_and_its_links_are_named(fleet, tmp_path):
    fleet.sim.fault("node3", "link-slow")
    try:
        proc = fleet.playbook(REPO_ROOT / "playbooks" / "validate.yml", "--tags", "bandwidth", "--limit", "converged",
                              "-e", json.dumps({"gpufleet_report_dir": str(tmp_path),
                                                "bandwidth_isolation_floor_fraction": FLOOR_FRACTION}))
    finally:
        fleet.sim.clear("node3", "link-slow")
    out = proc.stdout + proc.stderr
    bandwidth = json.loads((tmp_path / "bandwidth.json").read_text())
    assert bandwidth["nodes"] == ["node1", "node2", "node3"], bandwidth
    assert bandwidth["verdict"]["slow_nodes"] == ["node3"], (bandwidth["verdict"], bandwidth["ring"])
    counts = recap(out)
    assert counts["node3"]["failed"] == 1 and counts["node1"]["failed"] == 0 and counts["node2"]["failed"] == 0, \
        out[-4000:]
    slow = [(link["src"], link["dst"]) for link in bandwidth["verdict"]["slow_ring_links"]]
    assert any(src == "node3" for src, _dst in slow), bandwidth["ring"]
    # node3 was blamed only after its sends were measured a second time and were slow again.
    assert any(p["src"] == "node3" for p in bandwidth["pairs_confirmed"]), bandwidth
    sends = [p for p in bandwidth["pair_results"] if p["src"] == "node3"]
    assert sends and all(p["gbps"] < SHAPED_GBPS_CEILING for p in sends), sends
