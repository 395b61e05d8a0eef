# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Naming the slow node or link from bandwidth measurements: pure functions.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

The procedure (roles/bandwidth_isolation):

1. **Ring**: every node sends to its successor at the same time (the traffic pattern of a ring
   all-reduce). Each directed link gets a figure. If none is below the floor, stop.
2. **Per node**: each node's loopback figure (each HCA against itself on RDMA, the node's own address
   on TCP) tells a slow node from a slow network.
3. **Pairs**: the endpoints of the slow ring links are suspects; each suspect is measured against a
   reference node that touched no slow link, in both directions. A suspect slow against a good
   reference is the slow node; a slow ring link whose two endpoints are both fine against references
   is a slow link (cable, switch port). This halves the candidates at each step instead of measuring
   all N(N-1)/2 pairs (imbue isolates slow hosts with pairwise runs the same way).

Each slow ring link is also measured again alone; a link that is fast alone is cleared (its ring
figure was crowded out), not blamed.

Shared machines change speed between phases (measured in CI: a ring at 14.8 Gb/s, then every pair
test of the next phase at 3-9 Gb/s). So pair tests are judged against a floor from their own phase
too (the lower of the ring floor and ``fraction`` x the faster half of the pair figures), and a node
or link named slow is measured a second time (``confirm_pairs``); a directed pair measured more than
once keeps its best figure, the capacity the link showed.

A figure is slow when it is below ``fraction`` x the median of the faster half of its group (ring links, or per-node
figures), below ``min_gbps`` when that is set, or, on RDMA, below its own ``rate_floor_gbps`` (a fraction
of the slower port's line rate, bandwidth_plan.test_figure). 0.5 follows imbue's ib_burn acceptance
(per-link throughput 0.50-1.00 of line rate, reference/health-checks.md); the median makes it relative,
since the achievable rate depends on the network (iperf3 over a node's TCP interface, perftest over RDMA).
Which network, tool and devices a figure came from is planned in bandwidth_plan.py.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth_plan import test_figure
from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import judge_figure, usable_figure
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding

DEFAULT_FRACTION = 0.5


def ring_links(nodes):
    """Directed ring (a -> successor) over the nodes in the given order; [] below two nodes."""
    nodes = list(nodes)
    if len(nodes) < 2:
        return []
    return [{"src": nodes[i], "dst": nodes[(i + 1) % len(nodes)]} for i in range(len(nodes))]


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def checked(entry):
    """The entry with its ``gbps`` judged by figures.judge_figure: one that is no figure (NaN, Infinity,
    negative, text, absurd) becomes None with the reason in ``error``, so it counts as slow, never as a
    pass, and the report stays JSON. A measured zero is a figure (a link that moved nothing)."""
    if entry.get("gbps") is None:
        return entry
    problem = judge_figure(entry["gbps"], "%s->%s" % (entry.get("src"), entry.get("dst")), "Gb/s", zero_ok=True)[1]
    if problem is None:
        return entry
    return dict(entry, gbps=None, error="; ".join(e for e in (entry.get("error"), problem) if e))


def floor_for(values, fraction=DEFAULT_FRACTION, min_gbps=None):
    """The slow/fast boundary of a group of Gb/s figures: ``fraction`` x the median of the faster half,
    so a small ring where most links are slow still has a fast reference. Values that are no figure
    (figures.judge_figure) take no part in it."""
    ordered = sorted(f for f in (usable_figure(v, "Gb/s", zero_ok=True) for v in values) if f is not None)
    med = median(ordered[len(ordered) // 2:])
    relative = med * fraction if med is not None else None
    if min_gbps:
        return max(relative or 0.0, float(min_gbps))
    return relative


def slow_entries(entries, floor):
    """Entries (dicts with ``gbps``) below the floor or their own ``rate_floor_gbps`` (a fraction of the
    port's line rate on RDMA); a missing figure (a failed test) is slow."""
    return [e for e in entries if _is_slow(e, floor)]


def isolation_pairs(nodes, slow_links):
    """Directed pair tests that separate slow nodes from slow links (both directions per pair)."""
    suspects = []
    for link in slow_links:
        for node in (link["src"], link["dst"]):
            if node not in suspects:
                suspects.append(node)
    references = [n for n in nodes if n not in suspects]
    if not references:
        # Every node touched a slow link (on a small ring a slow sender also delays the ACKs of what
        # it receives): measure every pair, one at a time, so no test shares a link with another.
        pairs = [{"src": a, "dst": b} for a in nodes for b in nodes if a != b]
        return suspects, pairs
    # Each slow ring link is measured again alone: a figure crowded out by the concurrent ring (or by
    # a neighbour on a shared machine) is cleared instead of blamed.
    pairs = [{"src": link["src"], "dst": link["dst"]} for link in slow_links]
    for i, suspect in enumerate(suspects):
        ref = references[i % len(references)]
        pairs.append({"src": suspect, "dst": ref})
        pairs.append({"src": ref, "dst": suspect})
    return suspects, pairs


def pair_figures(registered, rate_fraction=None):
    """Link figures from a registered loop of ``bandwidth_test`` runs (or a list of their results).

    Each figure names the network, tool and devices (bandwidth_plan.test_figure); an item whose module
    failed keeps its pair with ``gbps`` None and the error, which the verdict counts as slow, never as a
    pass. Skipped items (and a skipped loop) give nothing.
    """
    if isinstance(registered, dict):
        results = registered.get("results") or []
    else:
        results = registered or []
    figures = []
    for result in results:
        if not isinstance(result, dict) or result.get("skipped"):
            continue
        test = result.get("test") if isinstance(result.get("test"), dict) else result.get("item")
        if not isinstance(test, dict) or not test.get("src"):
            continue
        figures.append(test_figure(dict(result, test=test), rate_fraction))
    return figures


def best_per_pair(pairs):
    """One entry per directed pair, keeping its best figure (a failed test counts only when it is all there is)."""
    best = {}
    for entry in pairs:
        key = (entry["src"], entry["dst"])
        kept = best.get(key)
        if kept is None or (entry.get("gbps") is not None and (kept.get("gbps") is None or entry["gbps"] > kept["gbps"])):
            best[key] = entry
    return list(best.values())


def pair_floor_for(ring_floor, pairs, fraction=DEFAULT_FRACTION, min_gbps=None):
    """The floor pair tests are judged against: the ring's, lowered to what the pair phase itself showed
    (the machine may have slowed between the phases); never below ``min_gbps``."""
    local = floor_for([p.get("gbps") for p in pairs], fraction, min_gbps)
    if ring_floor is None or local is None:
        return ring_floor if local is None else local
    return min(ring_floor, local)


def confirm_pairs(nodes, ring, per_node, pairs, fraction=DEFAULT_FRACTION, min_gbps=None):
    """The pair tests behind every node or link the first round names slow: measured again before blaming."""
    findings, _verdict = name_culprits(nodes, ring, per_node, pairs, fraction, min_gbps)
    again = []
    for finding in findings:
        if finding["code"] == "BANDWIDTH_NODE_SLOW":
            tests = finding.get("pairs", [])
        elif finding["code"] == "BANDWIDTH_LINK_SLOW":
            src, dst = finding["link"].split("->")
            tests = [{"src": src, "dst": dst}]
        else:
            continue
        for test in tests:
            pair = {"src": test["src"], "dst": test["dst"]}
            if pair not in again:
                again.append(pair)
    return again


def name_culprits(nodes, ring, per_node, pairs, fraction=DEFAULT_FRACTION, min_gbps=None, transport="socket"):
    """Findings naming the slow nodes and links, and the verdict data for the report.

    ``ring`` and ``pairs`` are lists of {src, dst, gbps} (with ``network``, ``tool``, ``rails`` and
    ``rate_floor_gbps`` when they come from bandwidth_plan.test_figure); ``per_node`` maps node -> {gbps}.
    ``transport`` labels the figures in the messages (e.g. "rdma, ib_write_bw"). A pair measured more
    than once (the confirmation round) keeps its best figure."""
    ring = [checked(e) for e in ring]
    pairs = best_per_pair([checked(p) for p in pairs])
    per_node = {node: checked(entry) for node, entry in per_node.items()}
    ring_floor = floor_for([e.get("gbps") for e in ring], fraction, min_gbps)
    slow_ring = slow_entries(ring, ring_floor)
    node_floor = floor_for([v.get("gbps") for v in per_node.values()], fraction)
    findings = _intra_findings(per_node, node_floor, fraction, transport)
    slow_nodes, cleared, pair_floor = set(), [], None
    if slow_ring:
        suspects, _planned = isolation_pairs(nodes, slow_ring)
        pair_floor = pair_floor_for(ring_floor, pairs, fraction, min_gbps)
        for suspect in suspects:
            finding = _node_finding(suspect, pairs, pair_floor, transport)
            if finding:
                slow_nodes.add(suspect)
                findings.append(finding)
        link_findings, cleared = _link_findings(slow_ring, slow_nodes, pairs, ring_floor, pair_floor, transport)
        findings += link_findings
    # No link measured is no evidence about the network: said, never a silent pass.
    not_checked = []
    if len(nodes) < 2:
        not_checked.append({"check": "inter-node bandwidth",
                            "reason": "%d node(s) in the run: no link between nodes to measure" % len(nodes)})
    elif not ring:
        not_checked.append({"check": "inter-node bandwidth", "reason": "no ring figure was measured"})
    if not per_node:
        not_checked.append({"check": "intra-node bandwidth", "reason": "no loopback figure was measured"})
    return findings, {"ring_floor_gbps": _r(ring_floor), "pair_floor_gbps": _r(pair_floor),
                      "node_floor_gbps": _r(node_floor),
                      "slow_ring_links": slow_ring, "slow_nodes": sorted(slow_nodes),
                      "cleared_links": cleared, "not_checked": not_checked}


def _figure_text(entry):
    """``node3->node1 3.63`` with the rails' devices when there is more than the link's figure."""
    text = "%s->%s %s" % (entry["src"], entry["dst"], _r(entry.get("gbps")))
    rails = [r for r in entry.get("rails") or [] if r.get("src_device")]
    if rails:
        text += " [%s]" % ", ".join("%s->%s %s" % (r["src_device"], r["dst_device"], _r(r.get("gbps"))) for r in rails)
    return text


def _floor_text(entry_or_entries, floor):
    rate = max([e.get("rate_floor_gbps") or 0 for e in entry_or_entries] or [0])
    if rate and (floor is None or rate >= floor):
        return "%s (the port-rate floor)" % _r(rate)
    return str(_r(floor))


def _intra_findings(per_node, node_floor, fraction, transport):
    findings = []
    unit = "Gb/s (%s)" % transport
    for node, entry in sorted(per_node.items()):
        if entry.get("gbps") is None or (node_floor is not None and entry["gbps"] < node_floor):
            # A warn: loopback measures the node alone (its CPU and memory on TCP, its HCAs and PCIe on
            # RDMA), which neighbours share and which swings under load.
            findings.append(make_finding(
                "BANDWIDTH_NODE_SLOW_INTRA", "warn", node,
                "intra-node (loopback) bandwidth %s %s is below %s (%.0f%% of the cluster median)%s" % (
                    entry.get("gbps") if entry.get("gbps") is not None else "(%s)" % (entry.get("error") or "none"),
                    unit, _r(node_floor), fraction * 100,
                    "".join(" [%s %s]" % (r.get("src_device"), _r(r.get("gbps"))) for r in entry.get("rails") or [])),
                "The node itself is slow (CPU/memory on TCP, an HCA or its PCIe link on RDMA): compare its GEMM "
                "and bandwidth figures, check throttling and the HCA's PCIe width",
                value=entry.get("gbps"), threshold=_r(node_floor), transport=transport,
                network=entry.get("network"), tool=entry.get("tool")))
    return findings


def _node_finding(suspect, pairs, pair_floor, transport):
    """BANDWIDTH_NODE_SLOW when every test in one direction against good nodes is slow, else None."""
    mine = [p for p in pairs if suspect in (p["src"], p["dst"])]
    sends = [p for p in mine if p["src"] == suspect]
    receives = [p for p in mine if p["dst"] == suspect]
    # A port can be slow one way only (a shaped or renegotiated transmit side), so a node is slow when
    # every test in one direction against good nodes is slow.
    slow_dirs = [name for name, tests in (("sending", sends), ("receiving", receives))
                 if tests and all(_is_slow(p, pair_floor) for p in tests)]
    if not slow_dirs:
        return None
    worst = min(mine, key=lambda p: p.get("gbps") or 0.0)
    network = sorted({p.get("network") for p in mine if p.get("network")})
    return make_finding(
        "BANDWIDTH_NODE_SLOW", "fail", suspect,
        "%s is slow %s against good nodes%s: %s Gb/s, floor %s" % (
            suspect, " and ".join(slow_dirs), " (%s)" % transport if transport else "",
            ", ".join(_figure_text(p) for p in mine), _floor_text(mine, pair_floor)),
        "Check the node's port on that network: link speed and errors (ibstat, perfquery on RDMA; ethtool on "
        "TCP), cable, switch port, traffic shaping (tc qdisc); then rerun validate",
        value=worst.get("gbps"), threshold=_r(pair_floor), transport=transport,
        network=network[0] if len(network) == 1 else network, tool=worst.get("tool"),
        devices=sorted({r.get("src_device") if p["src"] == suspect else r.get("dst_device")
                        for p in mine for r in p.get("rails") or [] if r.get("src_device")}),
        direction=slow_dirs, pairs=[dict(p) for p in mine])


def _link_findings(slow_ring, slow_nodes, pairs, ring_floor, pair_floor, transport):
    findings, cleared = [], []
    for link in slow_ring:
        if link["src"] in slow_nodes or link["dst"] in slow_nodes:
            continue
        retest = [p for p in pairs if (p["src"], p["dst"]) == (link["src"], link["dst"])]
        if retest and not any(_is_slow(p, pair_floor) for p in retest):
            cleared.append(link)
            continue
        for node in (link["src"], link["dst"]):
            findings.append(make_finding(
                "BANDWIDTH_LINK_SLOW", "fail", node,
                "link %s in the ring (%s)%s is below %s Gb/s while both nodes are fast against others" % (
                    _figure_text(link), transport,
                    "".join(", %s alone (floor %s)" % (_r(p.get("gbps")), _floor_text([p], pair_floor)) for p in retest),
                    _floor_text([link], ring_floor)),
                "Check the path between the two nodes: cables, switch ports, routing",
                value=link.get("gbps"), threshold=_r(ring_floor), transport=transport,
                network=link.get("network"), tool=link.get("tool"),
                link="%s->%s" % (link["src"], link["dst"])))
    return findings, cleared


def _is_slow(entry, floor):
    """Below the floor or its own port-rate floor; a figure that is no figure (figures.judge_figure) is slow."""
    figure = usable_figure(entry.get("gbps"), "Gb/s", zero_ok=True)
    limits = [f for f in (floor, entry.get("rate_floor_gbps")) if f is not None]
    return figure is None or (bool(limits) and figure < max(limits))


def _r(value):
    return None if value is None else round(float(value), 3)
