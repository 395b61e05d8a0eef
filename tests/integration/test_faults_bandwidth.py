"""Bandwidth isolation names the node with the slow link, and only that node, on the network it measured.

The fleet's nodes are converged (the fabric stage installed ibstat and wrote /etc/nccl.conf with the
eight Active InfiniBand HCAs), so the pair tests run on RDMA: perftest's ib_write_bw between the HCAs
NCCL uses, rail by rail. The simulator's ib_write_bw replays a real capture scaled to the port's rate;
node3's `link-slow` fault scales what leaves or reaches node3 to 1/100 of it (tests/sim/standins/fabric.py).

Forced onto the TCP fallback, the same fault is the real thing: a 10 Mbit/s token bucket on node3's eth0,
measured by the real iperf3 on the interface NCCL's socket transport uses (NCCL_SOCKET_IFNAME=eth0 in
/etc/nccl.conf): more than 100x slower than an unshaped veth on these machines, far beyond the
run-to-run noise of shared CPUs (about 2x).

Thresholds match the faults: a node is slow below 1/20 of the group's median, so noise never names a
healthy node and a fault 100x or more below the others always names node3. For the same reason one
1-second sample per test is enough here (the role's defaults, 2 x 2 s, are for real fabrics, where a slow
link can be 20% slow): iperf3's figure is what the receiver got, so a 1-second test cannot read a shaped
link faster than its 10 Mbit/s plus the 32 kbit burst.
"""

from __future__ import annotations

import json

import pytest

from simharness import REPO_ROOT, recap

pytestmark = pytest.mark.sim
# The shaped link's figure is below this whatever the load (10 Mbit/s = 0.01 Gb/s; shaping only caps it).
SHAPED_GBPS_CEILING = 0.05
FLOOR_FRACTION = 0.05
# The HGX H100 profile's eight ConnectX-7 400 Gb/s InfiniBand ports (NCCL_IB_HCA of the converged nodes).
HCAS = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]


def validate_bandwidth(fleet, tmp_path, **extra):
    fleet.sim.fault("node3", "link-slow")
    try:
        proc = fleet.playbook(REPO_ROOT / "playbooks" / "validate.yml", "--tags", "bandwidth", "--limit", "converged",
                              "-e", json.dumps({"gpufleet_report_dir": str(tmp_path),
                                                "gpufleet_baseline_dir": str(tmp_path / "baselines"),
                                                "bandwidth_isolation_floor_fraction": FLOOR_FRACTION,
                                                "bandwidth_isolation_seconds": 1, "bandwidth_isolation_repeats": 1,
                                                **extra}))
    finally:
        fleet.sim.clear("node3", "link-slow")
    out = proc.stdout + proc.stderr
    assert (tmp_path / "bandwidth.json").exists(), out[-6000:]
    bandwidth = json.loads((tmp_path / "bandwidth.json").read_text())
    assert bandwidth["nodes"] == ["node1", "node2", "node3"], bandwidth
    assert bandwidth["verdict"]["slow_nodes"] == ["node3"], (bandwidth["verdict"], bandwidth["ring"], out[-4000:])
    counts = recap(out)
    assert counts["node3"]["failed"] == 1 and counts["node1"]["failed"] == 0 and counts["node2"]["failed"] == 0, \
        out[-4000:]
    slow = [(link["src"], link["dst"]) for link in bandwidth["verdict"]["slow_ring_links"]]
    assert any("node3" in link for link in slow), bandwidth["ring"]
    # node3 was blamed only after its tests were measured a second time and were slow again.
    assert any("node3" in (p["src"], p["dst"]) for p in bandwidth["pairs_confirmed"]), bandwidth
    named = [f for f in bandwidth["findings"] if f["code"] == "BANDWIDTH_NODE_SLOW"]
    assert [f["node"] for f in named] == ["node3"], bandwidth["findings"]
    # Every figure names the network, the tool and the devices it came from.
    for figure in bandwidth["ring"] + bandwidth["pair_results"] + list(bandwidth["per_node"].values()):
        assert (figure["network"], figure["tool"]) == (bandwidth["network"], bandwidth["tool"]), figure
        assert figure["rails"] and all(r["src_device"] and r["dst_device"] for r in figure["rails"]), figure
    return bandwidth, named[0], out


def test_the_slow_node_is_named_on_rdma_between_its_hcas(fleet, tmp_path):
    bandwidth, finding, out = validate_bandwidth(fleet, tmp_path)
    assert (bandwidth["network"], bandwidth["tool"], bandwidth["rails"]) == ("rdma", "ib_write_bw", len(HCAS)), \
        bandwidth["why"]
    assert bandwidth["why"] == "every node has an Active RDMA port" and "perftest ib_write_bw" in bandwidth["note"]
    assert bandwidth["thresholds"]["rate_fraction"] == 0.8
    assert (finding["network"], finding["tool"], finding["devices"]) == ("rdma", "ib_write_bw", HCAS), finding
    assert "(rdma, ib_write_bw)" in finding["message"], finding["message"]
    # Rail k pairs the k-th HCA of each end; each is judged against the slower port's rate.
    tests = [p for p in bandwidth["pair_results"] if "node3" in (p["src"], p["dst"])]
    healthy = [p for p in bandwidth["pair_results"] if "node3" not in (p["src"], p["dst"])]
    assert tests and healthy
    for test in tests + healthy:
        assert [(r["src_device"], r["dst_device"]) for r in test["rails"]] == list(zip(HCAS, HCAS)), test
        assert test["line_rate_gbps"] == 400.0 and test["rate_floor_gbps"] == 320.0, test
    # The slow node's figures are 1/100 of the healthy ones (the fault), each rail on each end.
    assert all(p["gbps"] < 320.0 * FLOOR_FRACTION for p in tests), tests
    assert all(p["gbps"] > 320.0 for p in healthy), healthy
    # The per-node loopbacks stay inside each node: the link fault does not touch node3's own HCAs.
    assert bandwidth["per_node"]["node3"]["gbps"] > 320.0 and bandwidth["per_node"]["node3"]["src"] == "node3"
    assert "Measuring rdma with ib_write_bw (8 rail(s))" in out


def test_without_rdma_the_tcp_fallback_measures_nccls_interface_with_iperf3_and_says_so(fleet, tmp_path):
    bandwidth, finding, out = validate_bandwidth(fleet, tmp_path, bandwidth_isolation_network="tcp")
    assert (bandwidth["network"], bandwidth["tool"], bandwidth["rails"]) == ("tcp", "iperf3", 1), bandwidth["why"]
    assert bandwidth["note"].startswith("TCP FALLBACK, not RDMA: iperf3") and "TCP FALLBACK" in out
    assert bandwidth["thresholds"]["rate_fraction"] is None
    # The interface NCCL's socket transport uses, read from the converged /etc/nccl.conf.
    for node in ("node1", "node2", "node3"):
        tcp = bandwidth["endpoints"][node]["tcp"]
        assert (tcp["interface"], tcp["address"]) == ("eth0", fleet.sim.ip(node)), tcp
        assert tcp["source"] == "NCCL_SOCKET_IFNAME=eth0 (/etc/nccl.conf)", tcp
    assert (finding["network"], finding["tool"], finding["devices"]) == ("tcp", "iperf3", ["eth0"]), finding
    # node3's shaped egress caps what it sends: the token bucket's rate, whatever the machine's load.
    sends = [p for p in bandwidth["pair_results"] if p["src"] == "node3"]
    assert len(sends) > len({(p["src"], p["dst"]) for p in sends}) and all(
        p["gbps"] < SHAPED_GBPS_CEILING for p in sends), sends
    # No home-made socket tool is left on the nodes or in the collection.
    assert not list((REPO_ROOT / "roles").rglob("gpufleet_socket_bw.py"))
