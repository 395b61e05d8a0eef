# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Cluster homogeneity: which nodes differ from the rest, property by property,
plus the preflight report (JSON shape and Markdown rendering).

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


def homogeneity(nodes, properties=None, allow_mixed=None):
    """Group every property's values across nodes (see module doc for the rules)."""
    if properties is None:
        properties = DEFAULT_PROPERTIES
    allow = set(allow_mixed or ())
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
        for key, (value, members) in ordered[1:]:
            for node in members:
                outliers.append({"node": node, "value": value, "expected": majority_value})
        result[prop] = {
            "groups": [{"value": value, "display": display(value), "count": len(members), "nodes": members}
                       for _key, (value, members) in ordered],
            "majority": majority_value,
            "majority_count": len(majority_nodes),
            "tie": tie,
            "unknown": list(groups[None][1]) if None in groups else [],
            "homogeneous": len(ordered) <= 1,
            "mixed_allowed": allowed,
            "outliers": outliers,
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
            })

    flat = [rec for node in names for rec in per_node.get(node, ())]
    return {
        "node_count": len(names),
        "properties": result,
        "homogeneous": all(info["homogeneous"] or info["mixed_allowed"] for info in result.values()),
        "outliers": flat,
        "outlier_nodes": [n for n in names if any(not rec["allowed"] for rec in per_node.get(n, ()))],
    }


def outlier_findings(report, severity="fail"):
    """HOMOGENEITY_OUTLIER findings (docs/architecture.md shape), one per node and
    property, skipping properties whose mixing is allowed."""
    total = report.get("node_count", 0)
    out = []
    for o in report.get("outliers", []):
        if o.get("allowed"):
            continue
        if o.get("tie"):
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
    return out


# --------------------------------------------------------------------------- #
# The preflight report
# --------------------------------------------------------------------------- #

SUMMARY_COLUMNS = (
    ("node", "node"),
    ("gpus", None),
    ("VRAM GiB", "vram_gib"),
    ("source", "gpu_source"),
    ("driver", "driver_version"),
    ("CUDA", "cuda_version"),
    ("cores/GPU", "cpu_cores_per_gpu"),
    ("RAM/VRAM", "ram_per_vram"),
    ("NVMe", "nvme_count"),
    ("NIC Gb/s", "nic_max_gbps"),
    ("RDMA active", "rdma_active_ports"),
    ("Secure Boot", "secure_boot"),
    ("OS", "os_key"),
    ("kernel", "kernel"),
    ("result", None),
)


def build_report(cluster, profile, mode, summaries, node_findings, homogeneity_report,
                 homogeneity_findings=None, plan=None, plan_error=None):
    """One JSON-ready document: nodes' summaries, all findings in node order,
    the homogeneity groups, the plan (or why there is none)."""
    names = list(summaries)
    by_node = {n: [] for n in names}
    for f in list(node_findings or []) + list(homogeneity_findings or []):
        by_node.setdefault(f.get("node"), []).append(f)
    findings = [f for n in by_node for f in by_node[n]]
    failed = [n for n in by_node if any(f.get("severity") == "fail" for f in by_node[n])]
    warned = [n for n in by_node if n not in failed and by_node[n]]
    return {
        "cluster": cluster,
        "mode": mode,
        "profile": profile,
        "passed": not failed and plan_error is None,
        "node_count": len(names),
        "failed_nodes": failed,
        "warned_nodes": warned,
        "nodes": summaries,
        "findings": findings,
        "homogeneity": homogeneity_report,
        "plan": plan,
        "plan_error": plan_error,
    }


def _cell(value):
    text = display(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def _node_row(node, s, findings):
    fails = sum(1 for f in findings if f.get("severity") == "fail")
    warns = len(findings) - fails
    if fails:
        verdict = "FAIL (%d)" % fails
    elif warns:
        verdict = "warn (%d)" % warns
    else:
        verdict = "pass"
    row = []
    for _title, key in SUMMARY_COLUMNS:
        if _title == "node":
            row.append(node)
        elif _title == "gpus":
            row.append("%s x %s" % (s.get("gpu_count"), display(s.get("gpu_model"))) if s.get("gpu_count") else "none")
        elif _title == "result":
            row.append(verdict)
        else:
            row.append(s.get(key))
    return row


def summary_table(report, nodes=None):
    """The node x key-properties table (all nodes, or only ``nodes``)."""
    by_node = {}
    for f in report.get("findings", []):
        by_node.setdefault(f.get("node"), []).append(f)
    names = nodes if nodes is not None else list(report.get("nodes", {}))
    rows = [_node_row(n, report["nodes"].get(n, {}), by_node.get(n, [])) for n in names]
    return markdown_table([c[0] for c in SUMMARY_COLUMNS], rows)


def _profile_line(profile):
    if not profile:
        return "none"
    keys = [k for k in sorted(profile) if k not in ("name", "description", "extends") and profile[k] not in (None, [], "ignore")]
    return "; ".join("%s=%s" % (k, display(profile[k])) for k in keys)


def render_markdown(report):
    """preflight.md body: summary table, then findings, then the outlier table."""
    prof = report.get("profile") or {}
    out = [
        "# Preflight: %s" % report.get("cluster"),
        "",
        "Profile **%s**%s, mode **%s**, %d node(s): **%s**."
        % (prof.get("name"), " (extends %s)" % ", ".join(prof["extends"]) if prof.get("extends") else "",
           report.get("mode"), report.get("node_count", 0),
           "passed" if report.get("passed") else "failed on %s" % (", ".join(report.get("failed_nodes") or []) or "the plan")),
        "",
        "Thresholds: %s" % _profile_line(prof),
        "",
        "GPU model and VRAM source per node: `nvidia-smi` (driver loaded), `pci` (PCI device id and the"
        " model table, before the driver is installed).",
        "",
        "## Nodes",
        "",
        summary_table(report),
        "",
        "## Findings",
        "",
    ]
    findings = report.get("findings") or []
    if findings:
        out.append(markdown_table(
            ["node", "severity", "code", "GPU", "value", "expected", "message", "remediation"],
            [[f.get("node"), f.get("severity"), f.get("code"),
              "" if f.get("gpu_index") is None else "%s (%s)" % (f["gpu_index"], f.get("gpu_bus_id")),
              f.get("value"), f.get("threshold"), f.get("message"), f.get("remediation")] for f in findings]))
    else:
        out.append("None.")
    out += ["", "## Homogeneity", ""]
    hom = report.get("homogeneity") or {}
    props = hom.get("properties") or {}
    rows = []
    for prop, info in props.items():
        groups = info["groups"]
        if len(groups) <= 1:
            continue
        expected = info["majority"]
        for g in groups[1:]:
            rows.append([prop, g["display"], ", ".join(g["nodes"]), display(expected),
                         "%d/%d%s" % (info["majority_count"], hom.get("node_count", 0), " (tie)" if info["tie"] else ""),
                         "yes" if info["mixed_allowed"] else "no"])
    if rows:
        out.append(markdown_table(["property", "value", "outlier nodes", "expected", "majority", "mixing allowed"], rows))
    else:
        out.append("Every node reports the same value for: %s." % ", ".join(props) if props else "Not checked.")
    out += ["", "### Value groups", ""]
    out.append(markdown_table(
        ["property", "groups (value: node count)"],
        [[prop, "; ".join("%s: %d" % (g["display"], g["count"]) for g in info["groups"])] for prop, info in props.items()]))
    out += ["", "## Plan", ""]
    if report.get("plan_error"):
        out.append("No plan: %s" % report["plan_error"])
    elif report.get("plan") is not None:
        out.append(plan_table(report["plan"]))
        out.append("")
        out.append("Full plan: `plan.json`.")
    else:
        out.append("Not computed.")
    out.append("")
    return "\n".join(out)


# What the console shows of the plan (the Markdown report and plan.json have all of it).
PLAN_CONSOLE_KEYS = (
    "os", "arch", "cuda_version", "driver_branch", "driver_recommended_version", "driver_min_version",
    "kernel_modules", "nccl_version", "nvswitch", "fabricmanager_version", "repository",
    "packages.driver", "packages.toolkit", "packages.nccl", "packages.fabricmanager",
    "torch.version", "torch.variant", "torch.index_url", "gpus", "warnings",
)


def _plan_rows(plan, keys=None):
    rows = []
    for key, value in plan.items():
        if key == "rules_checked":
            continue
        if isinstance(value, dict):
            for sub, subval in value.items():
                if not isinstance(subval, (dict, list)) or all(not isinstance(v, (dict, list)) for v in subval):
                    rows.append(["%s.%s" % (key, sub), display(subval)])
        elif isinstance(value, list):
            if all(not isinstance(v, (dict, list)) for v in value):
                rows.append([key, display(value)])
        else:
            rows.append([key, display(value)])
    if keys is not None:
        order = {k: i for i, k in enumerate(keys)}
        rows = sorted([r for r in rows if r[0] in order], key=lambda r: order[r[0]])
    return rows


def plan_table(plan, keys=None):
    """The plan as a two-column table: scalars, and one level of nested mappings."""
    if not isinstance(plan, dict):
        return display(plan)
    return markdown_table(["plan", "value"], _plan_rows(plan, keys))


def console_text(report, report_dir=None):
    """What the run prints once: the summary table and the plan when the cluster passed (or in
    warn mode, with every finding); otherwise only which nodes failed (their reasons follow,
    one failed task per node)."""
    where = " Reports: %s" % report_dir if report_dir else ""
    failed = report.get("failed_nodes") or []
    if report.get("mode") == "strict" and failed:
        return "Preflight failed on %d of %d node(s): %s.%s" % (
            len(failed), report.get("node_count", 0), ", ".join(failed), where)
    parts = [summary_table(report)]
    findings = report.get("findings") or []
    if findings:
        parts.append("Findings (%s mode, not stopping):\n%s" % (
            report.get("mode"), "\n".join("- [%s] %s" % (f.get("severity"), f.get("message")) for f in findings)))
    if report.get("plan_error"):
        parts.append("No plan: %s" % report["plan_error"])
    elif report.get("plan") is not None:
        parts.append(plan_table(report["plan"], PLAN_CONSOLE_KEYS))
    if where:
        parts.append(where.strip())
    return "\n\n".join(parts)


def failure_messages(report, node):
    """The lines a strict run stops a node with: one per failed finding."""
    return [f["message"] for f in report.get("findings", [])
            if f.get("node") == node and f.get("severity") == "fail"]
