# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The preflight report: one JSON-ready document from the nodes' summaries, their findings, the
homogeneity report and the plan, and what is rendered from it (Markdown, the summary table, the
console text, a strict run's failure messages).

PRIVATE to the gpufleet.cluster collection. Pure functions, behind the filters of
plugins/filter/preflight_report.py.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.homogeneity import display

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
