"""Naming the slow node or link from ring, per-node and pair figures (scenario data: Gb/s numbers)."""

from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding

NODES = ["node1", "node2", "node3", "node4"]
FAST = 3.0
SHAPED = 0.009  # a 10 mbit/s token bucket, in Gb/s


def _ring(slow_src=None, nodes=None):
    return [dict(link, gbps=SHAPED if link["src"] == slow_src else FAST)
            for link in bandwidth.ring_links(nodes or NODES)]


def _measure(pairs, egress_slow=None):
    return [dict(p, gbps=SHAPED if p["src"] == egress_slow else FAST) for p in pairs]


def test_ring_and_median_floor():
    assert bandwidth.ring_links(["a"]) == []
    assert bandwidth.ring_links(["a", "b", "c"]) == [
        {"src": "a", "dst": "b"}, {"src": "b", "dst": "c"}, {"src": "c", "dst": "a"}]
    # Half the median of the faster half ([3, 5] -> 4).
    assert bandwidth.floor_for([1.0, 3.0, 5.0]) == 2.0
    assert bandwidth.floor_for([1.0, 3.0, 5.0], min_gbps=2.5) == 2.5


def test_healthy_ring_plans_no_pairs_and_names_nobody():
    ring = _ring()
    floor = bandwidth.floor_for([e["gbps"] for e in ring])
    assert bandwidth.slow_entries(ring, floor) == []
    per_node = {n: {"gbps": 20.0} for n in NODES}
    findings, verdict = bandwidth.name_culprits(NODES, ring, per_node, [])
    assert findings == [] and verdict["slow_nodes"] == []


def test_node_with_slow_egress_is_named_and_its_ring_neighbour_is_not():
    ring = _ring(slow_src="node3")
    floor = bandwidth.floor_for([e["gbps"] for e in ring])
    slow = bandwidth.slow_entries(ring, floor)
    assert slow == [{"src": "node3", "dst": "node4", "gbps": SHAPED}]
    suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    assert suspects == ["node3", "node4"]
    assert pairs == [{"src": "node3", "dst": "node4"},
                     {"src": "node3", "dst": "node1"}, {"src": "node1", "dst": "node3"},
                     {"src": "node4", "dst": "node2"}, {"src": "node2", "dst": "node4"}]
    per_node = {n: {"gbps": 20.0} for n in NODES}
    findings, verdict = bandwidth.name_culprits(NODES, ring, per_node, _measure(pairs, egress_slow="node3"))
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]
    assert findings[0]["direction"] == ["sending"] and validate_finding(findings[0]) == []
    assert verdict["slow_nodes"] == ["node3"]


def test_three_node_ring_after_one_node_dropped_out():
    nodes = ["node1", "node3", "node4"]
    ring = _ring(slow_src="node3", nodes=nodes)
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(nodes, slow)
    findings, _verdict = bandwidth.name_culprits(nodes, ring, {n: {"gbps": 20.0} for n in nodes},
                                                 _measure(pairs, egress_slow="node3"))
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]


def test_slow_link_between_two_good_nodes_names_the_link():
    ring = [dict(l, gbps=SHAPED if (l["src"], l["dst"]) == ("node2", "node3") else FAST)
            for l in bandwidth.ring_links(NODES)]
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    # The link is slow alone too; each end is fast against the others.
    measured = [dict(p, gbps=SHAPED if (p["src"], p["dst"]) == ("node2", "node3") else FAST) for p in pairs]
    findings, verdict = bandwidth.name_culprits(NODES, ring, {n: {"gbps": 20.0} for n in NODES}, measured)
    assert sorted((f["node"], f["code"]) for f in findings) == [
        ("node2", "BANDWIDTH_LINK_SLOW"), ("node3", "BANDWIDTH_LINK_SLOW")]
    assert findings[0]["link"] == "node2->node3" and verdict["slow_nodes"] == []


def test_a_ring_figure_that_is_fast_alone_is_cleared_not_blamed():
    ring = [dict(l, gbps=SHAPED if (l["src"], l["dst"]) == ("node2", "node3") else FAST)
            for l in bandwidth.ring_links(NODES)]
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    findings, verdict = bandwidth.name_culprits(NODES, ring, {n: {"gbps": 20.0} for n in NODES},
                                                [dict(p, gbps=FAST) for p in pairs])
    assert findings == [] and [(l["src"], l["dst"]) for l in verdict["cleared_links"]] == [("node2", "node3")]


def test_failed_measurement_counts_as_slow_and_slow_loopback_names_the_node():
    ring = _ring()
    ring[1]["gbps"] = None
    assert bandwidth.slow_entries(ring, 1.0) == [ring[1]]
    per_node = {"node1": {"gbps": 20.0}, "node2": {"gbps": 21.0}, "node3": {"gbps": 2.0}, "node4": {"gbps": 19.0}}
    findings, _verdict = bandwidth.name_culprits(NODES, _ring(), per_node, [])
    assert [(f["node"], f["code"], f["severity"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW_INTRA", "warn")]


def test_every_node_suspect_falls_back_to_all_pairs_and_still_names_the_sender():
    nodes = ["node1", "node3", "node4"]
    # Concurrent ring: node3's shaped egress also slows the ACKs of node1 -> node3.
    ring = [dict(l, gbps=SHAPED if l["src"] in ("node1", "node3") else FAST) for l in bandwidth.ring_links(nodes)]
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    suspects, pairs = bandwidth.isolation_pairs(nodes, slow)
    assert suspects == ["node1", "node3", "node4"] and len(pairs) == 6
    findings, verdict = bandwidth.name_culprits(nodes, ring, {n: {"gbps": 20.0} for n in nodes},
                                                _measure(pairs, egress_slow="node3"))
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]
    assert verdict["slow_nodes"] == ["node3"]


def test_a_single_node_run_says_the_network_was_not_checked():
    findings, verdict = bandwidth.name_culprits(["node1"], [], {"node1": {"gbps": 20.0}}, [])
    assert findings == []
    assert [item["check"] for item in verdict["not_checked"]] == ["inter-node bandwidth"]
    assert "1 node(s)" in verdict["not_checked"][0]["reason"]


def test_no_figures_at_all_is_not_checked_not_a_pass():
    findings, verdict = bandwidth.name_culprits(NODES, [], {}, [])
    assert findings == []
    assert [item["check"] for item in verdict["not_checked"]] == ["inter-node bandwidth", "intra-node bandwidth"]


def test_a_measured_cluster_has_nothing_unchecked():
    _findings, verdict = bandwidth.name_culprits(NODES, _ring(), {n: {"gbps": 20.0} for n in NODES}, [])
    assert verdict["not_checked"] == []


# Figures from two CI runs of this role on the simulated cluster (2 shared CPUs): the machine slowed
# down between the ring phase and the pair phase, and the old rule (pairs against the ring's floor)
# named healthy nodes. The pair phase is now judged against its own figures too.
def _pairs(figures):
    return [{"src": s, "dst": d, "gbps": g} for (s, d), g in figures.items()]


def test_a_pair_phase_slower_than_the_ring_names_nobody_three_nodes():
    nodes = ["node1", "node2", "node3"]
    ring = [{"src": "node1", "dst": "node2", "gbps": 6.5}, {"src": "node2", "dst": "node3", "gbps": 14.82},
            {"src": "node3", "dst": "node1", "gbps": 14.82}]
    pairs = _pairs({("node1", "node2"): 6.16, ("node1", "node3"): 3.076, ("node3", "node1"): 5.722,
                    ("node2", "node3"): 9.369, ("node3", "node2"): 4.332})
    findings, verdict = bandwidth.name_culprits(nodes, ring, {n: {"gbps": 20.0} for n in nodes}, pairs,
                                                transport="tcp-socket")
    assert verdict["ring_floor_gbps"] == 7.41
    # Faster half of the pair figures: 5.722, 6.16, 9.369 -> median 6.16 -> floor 3.08.
    assert verdict["pair_floor_gbps"] == 3.08
    assert findings == [] and verdict["slow_nodes"] == []
    assert verdict["cleared_links"] == [ring[0]]


def test_a_pair_phase_slower_than_the_ring_names_nobody_two_nodes():
    nodes = ["node1", "node2"]
    ring = [{"src": "node1", "dst": "node2", "gbps": 12.0}, {"src": "node2", "dst": "node1", "gbps": 28.932}]
    pairs = _pairs({("node1", "node2"): 11.084, ("node2", "node1"): 8.091})
    findings, verdict = bandwidth.name_culprits(nodes, ring, {n: {"gbps": 20.0} for n in nodes}, pairs)
    assert verdict["ring_floor_gbps"] == 14.466 and verdict["pair_floor_gbps"] == 5.542
    assert findings == []


def test_a_shaped_node_is_still_named_when_the_whole_pair_phase_is_slower():
    ring = _ring(slow_src="node3")
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    measured = [dict(p, gbps=SHAPED if p["src"] == "node3" else FAST * 0.3) for p in pairs]
    findings, verdict = bandwidth.name_culprits(NODES, ring, {n: {"gbps": 20.0} for n in NODES}, measured)
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]
    assert verdict["pair_floor_gbps"] == 0.45


def test_the_pair_floor_never_drops_below_min_gbps():
    assert bandwidth.pair_floor_for(7.41, _pairs({("a", "b"): 2.0, ("b", "a"): 2.0}), 0.5, 5.0) == 5.0
    assert bandwidth.pair_floor_for(None, [], 0.5, None) is None
    assert bandwidth.pair_floor_for(7.41, [], 0.5, None) == 7.41


def test_a_crowded_out_first_round_is_measured_again_and_then_cleared():
    ring = _ring(slow_src="node3")
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    # First round: node3's two sends happened to be crowded out (a neighbour's burst), nothing is shaped.
    first = [dict(p, gbps=0.5 if p["src"] == "node3" else FAST) for p in pairs]
    per_node = {n: {"gbps": 20.0} for n in NODES}
    again = bandwidth.confirm_pairs(NODES, ring, per_node, first)
    assert again == [{"src": "node3", "dst": "node4"}, {"src": "node3", "dst": "node1"},
                     {"src": "node1", "dst": "node3"}]
    second = [dict(p, gbps=FAST) for p in again]
    findings, verdict = bandwidth.name_culprits(NODES, ring, per_node, first + second)
    assert findings == [] and verdict["slow_nodes"] == []


def test_a_really_slow_node_stays_named_after_the_confirmation_round():
    ring = _ring(slow_src="node3")
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    first = _measure(pairs, egress_slow="node3")
    per_node = {n: {"gbps": 20.0} for n in NODES}
    again = bandwidth.confirm_pairs(NODES, ring, per_node, first)
    findings, _verdict = bandwidth.name_culprits(NODES, ring, per_node, first + _measure(again, egress_slow="node3"))
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]
    # One entry per directed pair in the finding: the best of both rounds.
    assert len(findings[0]["pairs"]) == 3


def test_a_slow_link_is_confirmed_with_its_own_retest():
    ring = [dict(l, gbps=SHAPED if (l["src"], l["dst"]) == ("node2", "node3") else FAST)
            for l in bandwidth.ring_links(NODES)]
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    measured = [dict(p, gbps=SHAPED if (p["src"], p["dst"]) == ("node2", "node3") else FAST) for p in pairs]
    assert bandwidth.confirm_pairs(NODES, ring, {n: {"gbps": 20.0} for n in NODES}, measured) == [
        {"src": "node2", "dst": "node3"}]


def test_pair_figures_from_a_registered_loop_of_bandwidth_test_runs():
    test = {"src": "node1", "dst": "node2", "client": "node1", "server": "node2", "network": "rdma",
            "tool": "ib_write_bw", "server_address": "10.0.0.2",
            "rails": [{"rail": 0, "port": 29517, "client_device": "mlx5_0", "server_device": "mlx5_0",
                       "line_rate_gbps": 400}]}
    back = dict(test, src="node2", dst="node1", client="node2", server="node1")
    registered = {"results": [
        {"item": test, "test": test, "results": [{"rail": 0, "gbps": 363.47, "samples_gbps": [363.47]}]},
        # A module that failed has no test of its own: the loop item says which pair it was.
        {"item": back, "failed": True, "msg": "bandwidth_test: the test has no rails"},
        {"item": test, "skipped": True},
    ]}
    figures = bandwidth.pair_figures(registered, rate_fraction=0.8)
    assert [(f["src"], f["dst"], f["gbps"]) for f in figures] == [("node1", "node2", 363.47), ("node2", "node1", None)]
    assert figures[0]["network"] == "rdma" and figures[0]["tool"] == "ib_write_bw"
    assert figures[0]["rails"][0]["src_device"] == "mlx5_0" and figures[0]["rate_floor_gbps"] == 320.0
    assert "no rails" in figures[1]["error"]
    assert bandwidth.pair_figures({"skipped": True, "changed": False}) == []
    assert bandwidth.pair_figures(None) == []
    # A test without a figure is slow, never a pass.
    assert bandwidth.best_per_pair(figures + [{"src": "node2", "dst": "node1", "gbps": None}])[1]["gbps"] is None


def test_a_figure_below_its_port_rate_floor_is_slow_even_when_every_link_is_equally_slow():
    # Every link at 150 Gb/s on 400 Gb/s ports: the median floor (75) passes them all, the port's rate does not.
    ring = [dict(link, gbps=150.0, rate_floor_gbps=320.0, network="rdma", tool="ib_write_bw")
            for link in bandwidth.ring_links(NODES)]
    floor = bandwidth.floor_for([e["gbps"] for e in ring])
    assert floor == 75.0 and bandwidth.slow_entries(ring, floor) == ring
    assert bandwidth.slow_entries([dict(ring[0], gbps=363.47)], floor) == []
