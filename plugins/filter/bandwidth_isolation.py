# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/bandwidth.py: the slow-node/slow-link search.

- ``nodes | gpufleet.cluster.bandwidth_ring_links``: directed ring a->b->...->a
- ``ring | gpufleet.cluster.bandwidth_slow_links(fraction, min_gbps)``: ring links below the floor
- ``nodes | gpufleet.cluster.bandwidth_isolation_pairs(slow_links)``: suspect/reference pair tests
- ``registered | gpufleet.cluster.bandwidth_pair_figures``: a registered pair-test loop as {src, dst, gbps} entries
- ``nodes | gpufleet.cluster.bandwidth_confirm_pairs(ring, per_node, pairs, fraction, min_gbps)``: the pair
  tests behind every node or link the first round names, to measure again before blaming
- ``nodes | gpufleet.cluster.bandwidth_verdict(ring, per_node, pairs, fraction, min_gbps, transport)``
"""

from __future__ import annotations

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


def bandwidth_pair_figures(registered):
    if registered is not None and not isinstance(registered, dict):
        raise AnsibleFilterError("bandwidth_pair_figures needs a registered loop result, got %r" % (registered,))
    return _bw.pair_figures(registered)


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
            "bandwidth_ring_links": bandwidth_ring_links,
            "bandwidth_slow_links": bandwidth_slow_links,
            "bandwidth_isolation_pairs": bandwidth_isolation_pairs,
            "bandwidth_confirm_pairs": bandwidth_confirm_pairs,
            "bandwidth_pair_figures": bandwidth_pair_figures,
            "bandwidth_verdict": bandwidth_verdict,
        }
