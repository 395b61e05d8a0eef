# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Cluster homogeneity: which nodes differ from the rest, property by property.
The preflight report built from it lives in preflight_report.py.

PRIVATE to the gpufleet.cluster collection. Pure functions; linear in
nodes x properties (one dict lookup per value).

``homogeneity({node: {property: value}}, properties, allow_mixed)`` returns, per
property, the value groups, the majority value and the outliers with the value
expected of them.

Rules (stable; the report and the tests rely on them):

* A value is compared as-is after freezing (lists -> tuples, dicts -> sorted
  item tuples), together with its type: ``1``, ``1.0``, ``True`` and ``"1"`` are
  four different values.
* ``None`` (the fact could not be read, e.g. no driver yet) is a group of its
  own, shown as ``unknown``. It counts like any other value: on a bare cluster
  every node has driver ``unknown`` and that is homogeneous; one node that
  cannot report a value the others report is an outlier.
* The majority is the biggest group. Ties are broken, independently of node
  order: a known value before ``unknown``, then the smallest value in natural
  order (numbers numerically, before strings; strings by text). A tie is
  flagged (``tie: true``) so the message can say there was no clear majority.
* Nodes keep the order they were given in (inventory order) inside groups and
  in the outlier list.
* A property named in ``allow_mixed`` is still grouped and reported, but its
  outliers are marked ``allowed`` and raise no finding.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding

DEFAULT_PROPERTIES = (
    "gpu_model",
    "gpu_count",
    "vram_mib",
    "driver_version",
    "cuda_version",
    "vbios_version",
    "pcie_width",
    "nvswitch_count",
    "hca_count",
    "hca_rate_gbps",
    "hca_firmware",
    "cpu_model",
    "kernel",
    "os",
)

# Why a mismatch matters / what to do, per property (used as remediation text).
REMEDIATION = {
    "gpu_model": "Mixed GPU models run at the speed of the slowest; move the node to its own cluster or replace its GPUs.",
    "gpu_count": "A node with fewer GPUs breaks the world size and rank layout; check for a missing GPU (lspci, dmesg Xid 79).",
    "vram_mib": "Different memory sizes change the batch that fits; the smallest wins for the whole job.",
    "driver_version": "Run the gpu_stack stage so every node gets the planned driver.",
    "cuda_version": "Run the gpu_stack stage so every node gets the planned driver and CUDA.",
    "vbios_version": "Update the VBIOS to the cluster's version with the vendor's firmware tool.",
    "pcie_width": "A narrower PCIe link halves host<->GPU bandwidth: reseat the GPU or riser, check the BIOS slot settings.",
    "nvswitch_count": "A missing NVSwitch cuts NVLink bandwidth; check lspci and the fabric manager.",
    "hca_count": "A missing HCA removes a rail; check lspci, cabling and the OFED/rdma-core install.",
    "hca_rate_gbps": "A port that trained at a lower rate slows every collective; check the cable, transceiver and switch port.",
    "hca_firmware": "Update the HCA firmware (mlxfwmanager / mstflint) to the cluster's version.",
    "cpu_model": "Different CPUs change data-loading speed and NUMA layout.",
    "kernel": "Boot every node into the same kernel so the driver modules match (or allow it with preflight_allow_mixed).",
    "os": "Reinstall the node with the cluster's OS release.",
}

UNKNOWN = "unknown"

# Where an expected value comes from, for a property the inventory can pin (a lone node, or a cluster that lost
# the same GPU everywhere, has no majority to tell it apart).
EXPECTED_SOURCE = {"gpu_count": "gpufleet_expected_gpu_count"}
NOT_CHECKED_ALONE = {"gpu_count": "GPU count"}


def _freeze(value):
    if isinstance(value, list) or isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


def _sort_key(frozen):
    """Natural order: known before unknown; numbers (numerically) before text."""
    if frozen is None:
        return (1, 0, 0, "")
    if isinstance(frozen, bool):
        return (0, 1, 0, str(frozen))
    if isinstance(frozen, (int, float)):
        return (0, 0, frozen, "")
    return (0, 2, 0, str(frozen))


def display(value):
    """How a value is written in messages and tables."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(display(v) for v in value)
    return str(value)


def quoted(value):
    """Text values quoted, numbers and unknown bare: 'NVIDIA H100 80GB HBM3', 8, unknown."""
    if isinstance(value, str):
        return "'%s'" % value
    return display(value)


def _expected_values(expected):
    """The pinned values that mean something: None, "" and a count of 0 (inventory default) pin nothing."""
    return {prop: value for prop, value in (expected or {}).items()
            if value is not None and value != "" and not (prop in EXPECTED_SOURCE and value == 0)}


def _not_checked(names, properties, expected):
    """A lone node has no other node to be compared with: what the inventory does not pin is not checked."""
    if len(names) != 1:
        return []
    return [{"check": prop, "node": names[0], "reason": "%s: not checked (one node): set %s in the inventory to hold "
             "a lone node to a count" % (NOT_CHECKED_ALONE[prop], EXPECTED_SOURCE[prop])}
            for prop in properties if prop in NOT_CHECKED_ALONE and prop not in expected]


def homogeneity(nodes, properties=None, allow_mixed=None, expected=None):
    """Group every property's values across nodes (see module doc for the rules). ``expected`` pins a
    property's value ({"gpu_count": 8}, from the inventory): every node that differs is an outlier, even a
    lone node or a majority; a lone node's unpinned gpu_count is listed under ``not_checked``."""
    if properties is None:
        properties = DEFAULT_PROPERTIES
    allow = set(allow_mixed or ())
    pinned = _expected_values(expected)
    names = list(nodes)
    result = {}
    per_node = {}
    rows = [(node, nodes[node] or {}) for node in names]
    for prop in properties:
        groups = {}    # group key -> [original value, [nodes]]
        for node, facts in rows:
            value = facts.get(prop)
            # Strings and None key themselves; other values are keyed with their type so
            # True, 1 and 1.0 (equal in Python) stay apart.
            key = value if value is None or value.__class__ is str else (value.__class__.__name__, _freeze(value))
            entry = groups.get(key)
            if entry is None:
                groups[key] = [value, [node]]
            else:
                entry[1].append(node)
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1][1]), _sort_key(_freeze(kv[1][0]))))
        majority_key, (majority_value, majority_nodes) = ordered[0] if ordered else (None, (None, []))
        tie = len(ordered) > 1 and len(ordered[1][1][1]) == len(majority_nodes)
        allowed = prop in allow
        outliers = []
        deviating = [group for _key, group in ordered[1:]]
        if prop in pinned:
            # The inventory's value, not the majority: a lone node, or nodes that all lost the same GPU, differ from it.
            majority_value, tie = pinned[prop], False
            majority_nodes = [n for _key, (value, members) in ordered for n in members if value == majority_value]
            deviating = [group for _key, group in ordered if group[0] != majority_value]
        for value, members in deviating:
            for node in members:
                outliers.append({"node": node, "value": value, "expected": majority_value})
        result[prop] = {
            "groups": [{"value": value, "display": display(value), "count": len(members), "nodes": members}
                       for _key, (value, members) in ordered],
            "majority": majority_value,
            "majority_count": len(majority_nodes),
            "tie": tie,
            "unknown": list(groups[None][1]) if None in groups else [],
            "homogeneous": len(ordered) <= 1 and not outliers,
            "mixed_allowed": allowed,
            "outliers": outliers,
            "expected_source": EXPECTED_SOURCE.get(prop, "expected") if prop in pinned else None,
        }
        for o in outliers:
            per_node.setdefault(o["node"], []).append({
                "node": o["node"],
                "property": prop,
                "value": o["value"],
                "expected": majority_value,
                "majority_count": len(majority_nodes),
                "tie": tie,
                "allowed": allowed,
                "source": result[prop]["expected_source"],
            })

    flat = [rec for node in names for rec in per_node.get(node, ())]
    return {
        "node_count": len(names),
        "properties": result,
        "homogeneous": all(info["homogeneous"] or info["mixed_allowed"] for info in result.values()),
        "outliers": flat,
        "outlier_nodes": [n for n in names if any(not rec["allowed"] for rec in per_node.get(n, ()))],
        "not_checked": _not_checked(names, properties, pinned),
    }


def outlier_findings(report, severity="fail"):
    """HOMOGENEITY_OUTLIER findings (docs/architecture.md shape), one per node and
    property, skipping properties whose mixing is allowed."""
    total = report.get("node_count", 0)
    out = []
    for o in report.get("outliers", []):
        if o.get("allowed"):
            continue
        if o.get("source"):
            basis = "the inventory's %s; %d of %d nodes have it" % (o["source"], o["majority_count"], total)
        elif o.get("tie"):
            basis = "no clear majority; %d of %d nodes each, expected value chosen by sort order" % (
                o["majority_count"], total)
        else:
            basis = "%d of %d nodes" % (o["majority_count"], total)
        out.append(make_finding(
            "HOMOGENEITY_OUTLIER", severity, o["node"],
            "%s: %s is %s, expected %s (%s)" % (
                o["node"], o["property"], quoted(o["value"]), quoted(o["expected"]), basis),
            REMEDIATION.get(o["property"],
                            "Make the node match the others, or list the property in preflight_allow_mixed."),
            value=o["value"], threshold=o["expected"]))
    for entry in report.get("not_checked", []):
        # A lone node passes no comparison by having nothing to compare with: said, with what would check it.
        out.append(make_finding(
            "HOMOGENEITY_NOT_CHECKED", "warn", entry["node"], "%s: %s" % (entry["node"], entry["reason"]),
            "Set %s in the inventory, or check the node together with the rest of the cluster (no --limit)"
            % EXPECTED_SOURCE.get(entry["check"], "the expected value"), property=entry["check"]))
    return out
