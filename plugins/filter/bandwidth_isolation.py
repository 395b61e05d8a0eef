# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/bandwidth.py and bandwidth_plan.py: the slow-node/slow-link search.

- ``rdma_info | gpufleet.cluster.bandwidth_endpoint(nccl_conf, facts, address, interface, devices)``: what
  this node would be measured on (its RDMA fabric ports and NCCL's socket interface)
- ``nodes | gpufleet.cluster.bandwidth_network_plan(endpoints, network, rdma_tool)``: RDMA or the TCP fallback
- ``links | gpufleet.cluster.bandwidth_link_tests(plan, endpoints, port)``: one test per link, rails and roles
- ``test | gpufleet.cluster.bandwidth_server_argv(rail, seconds, size, qps)``: the server command of a rail
- ``test | gpufleet.cluster.bandwidth_servers_argv(seconds, size, qps, repeats)``: one command serving every
  rail of a perftest test, each rail's server once per repeat
- ``nodes | gpufleet.cluster.bandwidth_ring_links``: directed ring a->b->...->a
- ``ring | gpufleet.cluster.bandwidth_slow_links(fraction, min_gbps)``: ring links below the floor
- ``nodes | gpufleet.cluster.bandwidth_isolation_pairs(slow_links)``: suspect/reference pair tests
- ``results | gpufleet.cluster.bandwidth_pair_figures(rate_fraction)``: bandwidth_test results (a registered
  loop or a list) as {src, dst, gbps, network, tool, rails} entries
- ``nodes | gpufleet.cluster.bandwidth_confirm_pairs(ring, per_node, pairs, fraction, min_gbps)``: the pair
  tests behind every node or link the first round names, to measure again before blaming
- ``nodes | gpufleet.cluster.bandwidth_verdict(ring, per_node, pairs, fraction, min_gbps, transport)``
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth as _bw
from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth_plan as _plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.tool_address import check_address


def _nodes(nodes):
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, str) for n in nodes):
        raise AnsibleFilterError("bandwidth filters need a list of node names, got %r" % (nodes,))
    return list(nodes)


def bandwidth_ring_links(nodes):
    return _bw.ring_links(_nodes(nodes))


def bandwidth_slow_links(ring, fraction=_bw.DEFAULT_FRACTION, min_gbps=0):
    floor = _bw.floor_for([e.get("gbps") for e in ring or []], float(fraction), float(min_gbps or 0) or None)
    return _bw.slow_entries(ring or [], floor)


def bandwidth_isolation_pairs(nodes, slow_links):
    return _bw.isolation_pairs(_nodes(nodes), slow_links or [])[1]


def bandwidth_pair_figures(registered, rate_fraction=None):
    if registered is not None and not isinstance(registered, (dict, list)):
        raise AnsibleFilterError("bandwidth_pair_figures needs a registered loop or a list of bandwidth_test "
                                 "results, got %r" % (registered,))
    return _bw.pair_figures(registered, float(rate_fraction) if rate_fraction else None)


def _interfaces(facts):
    """{name: [IPv4 addresses]} from gathered facts (``interfaces`` and each ``<name>`` entry)."""
    found = {}
    for name in (facts or {}).get("interfaces") or []:
        entry = facts.get(name.replace("-", "_")) or facts.get(name) or {}
        ipv4 = entry.get("ipv4") or {}
        addresses = [ipv4.get("address")] + [a.get("address") for a in entry.get("ipv4_secondaries") or []]
        found[name] = [a for a in addresses if a]
    return found


def bandwidth_endpoint(rdma_info, nccl_conf="", facts=None, address=None, interface="", devices=None):
    if not isinstance(rdma_info, dict):
        raise AnsibleFilterError("bandwidth_endpoint needs the rdma_info result, got %r" % (rdma_info,))
    if not address:
        raise AnsibleFilterError("bandwidth_endpoint needs the node's address (bandwidth_isolation_address), got %r"
                                 % (address,))
    try:
        check_address(address, "address")
    except ValueError as exc:
        raise AnsibleFilterError("bandwidth_endpoint: %s (bandwidth_isolation_address)" % exc) from exc
    conf = _plan.parse_nccl_conf(nccl_conf or "")
    return {"address": address, "nccl_conf": conf,
            "rdma": _plan.rdma_endpoint(rdma_info.get("cas") or [], conf, list(devices or []) or None),
            "tcp": _plan.socket_endpoint(conf, _interfaces(facts), address, interface or None)}


def bandwidth_network_plan(nodes, endpoints, network="auto", rdma_tool="ib_write_bw"):
    missing = [n for n in _nodes(nodes) if n not in (endpoints or {})]
    if missing:
        raise AnsibleFilterError("bandwidth_network_plan: no endpoint for %s" % ", ".join(missing))
    try:
        return _plan.network_plan(nodes, endpoints, network, rdma_tool)
    except ValueError as exc:
        raise AnsibleFilterError("bandwidth_network_plan: %s (bandwidth_isolation_network / _rdma_tool)" % exc)


def bandwidth_link_tests(links, plan, endpoints, port):
    return _plan.link_tests(links or [], plan, endpoints, int(port))


def bandwidth_server_argv(test, rail, seconds, size=None, qps=None):
    try:
        return _plan.server_argv(test, rail, seconds, size, qps)
    except ValueError as exc:
        raise AnsibleFilterError("bandwidth_server_argv: %s" % exc) from exc


def bandwidth_servers_argv(test, seconds, size=None, qps=None, repeats=1):
    if int(repeats) < 1:
        raise AnsibleFilterError("bandwidth_servers_argv: repeats must be 1 or more, got %r" % (repeats,))
    try:
        return _plan.servers_argv(test, seconds, size, qps, int(repeats))
    except ValueError as exc:
        raise AnsibleFilterError("bandwidth_servers_argv: %s" % exc) from exc


def bandwidth_confirm_pairs(nodes, ring, per_node, pairs, fraction=_bw.DEFAULT_FRACTION, min_gbps=0):
    return _bw.confirm_pairs(_nodes(nodes), ring or [], per_node or {}, pairs or [],
                             float(fraction), float(min_gbps or 0) or None)


def bandwidth_verdict(nodes, ring, per_node, pairs, fraction=_bw.DEFAULT_FRACTION, min_gbps=0, transport="socket"):
    if not 0 < float(fraction) <= 1:
        raise AnsibleFilterError("bandwidth_verdict: fraction must be in (0, 1], got %r" % (fraction,))
    findings, verdict = _bw.name_culprits(_nodes(nodes), ring or [], per_node or {}, pairs or [],
                                          float(fraction), float(min_gbps or 0) or None, transport)
    return {"findings": findings, "verdict": verdict}


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {
            "bandwidth_endpoint": bandwidth_endpoint,
            "bandwidth_network_plan": bandwidth_network_plan,
            "bandwidth_link_tests": bandwidth_link_tests,
            "bandwidth_server_argv": bandwidth_server_argv,
            "bandwidth_servers_argv": bandwidth_servers_argv,
            "bandwidth_ring_links": bandwidth_ring_links,
            "bandwidth_slow_links": bandwidth_slow_links,
            "bandwidth_isolation_pairs": bandwidth_isolation_pairs,
            "bandwidth_confirm_pairs": bandwidth_confirm_pairs,
            "bandwidth_pair_figures": bandwidth_pair_figures,
            "bandwidth_verdict": bandwidth_verdict,
        }
