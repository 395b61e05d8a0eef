# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/bandwidth.py: the slow-node/slow-link search.

- ``nodes | gpufleet.cluster.bandwidth_ring_links``: directed ring a->b->...->a
- ``ring | gpufleet.cluster.bandwidth_slow_links(fraction, min_gbps)``: ring links below the floor
- ``nodes | gpufleet.cluster.bandwidth_isolation_pairs(slow_links)``: suspect/reference pair tests
- ``nodes | gpufleet.cluster.bandwidth_verdict(ring, per_node, pairs, fraction, min_gbps, transport)``
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: bandwidth_verdict
short_description: Name the slow nodes and links from ring, per-node and pair bandwidth figures
description:
  - Judges ring links against I(fraction) x their median (and I(min_gbps) when set), compares each
    node's intra-node figure with the nodes' median, and uses the suspect/reference pair tests to
    tell a slow node (slow in one direction against every good node) from a slow link.
  - Returns findings (codes C(BANDWIDTH_NODE_SLOW), C(BANDWIDTH_LINK_SLOW), C(BANDWIDTH_NODE_SLOW_INTRA))
    and the verdict data (floors, slow ring links, slow nodes).
  - The same file provides C(bandwidth_ring_links), C(bandwidth_slow_links) and C(bandwidth_isolation_pairs).
positional: _input, ring, per_node, pairs, fraction, min_gbps, transport
options:
  _input:
    description: Node names in ring order.
    type: list
    elements: str
    required: true
  ring:
    description: Ring measurements, each C(src), C(dst), C(gbps) (null when the test failed).
    type: list
    elements: dict
  per_node:
    description: Node name to its intra-node measurement (C(gbps)).
    type: dict
  pairs:
    description: Pair measurements, like I(ring).
    type: list
    elements: dict
  fraction:
    description: Slow below this fraction of the median.
    type: float
    default: 0.5
  min_gbps:
    description: Absolute floor in Gb/s; 0 for none.
    type: float
    default: 0
  transport:
    description: What carried the traffic, written into the findings (e.g. C(tcp-socket)).
    type: str
    default: socket
"""

EXAMPLES = r"""
- name: Judge the measurements
  ansible.builtin.set_fact:
    verdict: "{{ nodes | gpufleet.cluster.bandwidth_verdict(ring, per_node, pairs, 0.5, 0, 'tcp-socket') }}"
"""

RETURN = r"""
_value:
  description:
    - C(findings) (list of findings) and C(verdict) (ring_floor_gbps, node_floor_gbps, slow_ring_links, slow_nodes,
      cleared_links, not_checked - what could not be measured, with the reason).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth as _bw


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


def bandwidth_verdict(nodes, ring, per_node, pairs, fraction=_bw.DEFAULT_FRACTION, min_gbps=0, transport="socket"):
    if not 0 < float(fraction) <= 1:
        raise AnsibleFilterError("bandwidth_verdict: fraction must be in (0, 1], got %r" % (fraction,))
    findings, verdict = _bw.name_culprits(_nodes(nodes), ring or [], per_node or {}, pairs or [],
                                          float(fraction), float(min_gbps or 0) or None, transport)
    return {"findings": findings, "verdict": verdict}


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {
            "bandwidth_ring_links": bandwidth_ring_links,
            "bandwidth_slow_links": bandwidth_slow_links,
            "bandwidth_isolation_pairs": bandwidth_isolation_pairs,
            "bandwidth_verdict": bandwidth_verdict,
        }
