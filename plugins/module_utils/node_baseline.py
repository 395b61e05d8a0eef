# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Per-node and per-link baselines beside the cluster's, and the regression verdict per node: pure functions.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

The smoke job keeps one baseline per cluster shape; a node 15 % slower than its own history hides in
it. Each measuring step therefore also keeps one baseline per node and kind (``compute``: every GPU's
GEMM and memory figures; ``nccl``: the node's nccl-tests busbw; ``links``: the node's pair-test figures
against each peer, per tool and device pair), keyed by the node's hardware (GPU model and count; the
network, tool and devices of its links). A stored baseline is checked exactly as the smoke job checks
its own (smoke_verdict.document_problems / metric_problems: schema, metrics that figures.judge_figure
accepts, the same hardware key): a broken or foreign one fails with its reason, never passes. A metric the baseline has and
this run did not measure regresses: the part it measured must still be there.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import judge_figure, unit_of
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_parse import slug
from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_verdict import (
    DEFAULT_TOLERANCE, compare_metrics, document_problems, metric_problems)

SCHEMA = "gpufleet.node.baseline/1"
REQUIRED_KEYS = ("schema", "node", "kind", "hardware_key", "metrics")
KINDS = ("compute", "nccl", "links")


def baseline_filename(cluster, node, kind):
    return "node-%s--%s--%s.json" % (slug(cluster), slug(node), kind)


def compute_metrics(compute_result):
    """{node: {hardware_key, metrics}} from gpu_compute.compute_verdict: each GPU's figures by index."""
    nodes = {}
    for gpu in compute_result.get("gpus") or []:
        entry = nodes.setdefault(gpu["node"], {"gpus": [], "metrics": {}})
        entry["gpus"].append(gpu.get("model_key") or slug(gpu.get("name") or "gpu"))
        for dtype, figure in (gpu.get("gemm") or {}).items():
            entry["metrics"]["gpu%s.gemm_%s_tflops" % (gpu["index"], dtype)] = figure.get("tflops")
        entry["metrics"]["gpu%s.copy_gbps" % gpu["index"]] = (gpu.get("memory") or {}).get("gbps")
    return {node: {"hardware_key": "%s-x%d" % (_model(e["gpus"]), len(e["gpus"])), "metrics": e["metrics"]}
            for node, e in nodes.items()}


def _model(models):
    return models[0] if len(set(models)) == 1 else "mixed"


def nccl_metrics(nccl_result, facts):
    """{node: {hardware_key, metrics}} from gpu_benchmark.nccl_verdict: the node's own all_reduce busbw."""
    out = {}
    for record in (nccl_result.get("runs") or {}).get("single") or []:
        node = record["nodes"][0]
        fact = facts.get(node) or {}
        out[node] = {"hardware_key": "%s-x%s" % (fact.get("model_key") or "gpu", fact.get("gpus")),
                     "metrics": {"nccl.all_reduce_busbw_gbps": record.get("busbw_gbps")}}
    return out


def link_metrics(figures):
    """{node: {hardware_key, metrics}} from the pair tests' figures: its loopback per device, and each link it
    sends on per rail (its device and the peer's), keyed by network and tool; the hardware key lists its
    devices. Which peers a node meets depends on the run (the ring's order, the suspects), so a link figure
    this run did not measure is not a regression; its loopback ones are."""
    out = {}
    for figure in figures or []:
        entry = out.setdefault(figure["src"], {"devices": set(), "metrics": {}, "network": figure.get("network"),
                                               "tool": figure.get("tool")})
        for rail in figure.get("rails") or []:
            entry["devices"].add(rail.get("src_device") or "-")
            if figure.get("src") == figure.get("dst"):
                name = "loopback.%s.%s" % (figure.get("tool"), rail.get("src_device"))
            else:
                name = "link.%s.%s.%s-%s" % (figure["dst"], figure.get("tool"), rail.get("src_device"),
                                             rail.get("dst_device"))
            if rail.get("gbps") is not None:
                entry["metrics"][name] = max(rail["gbps"], entry["metrics"].get(name) or 0)
            else:
                entry["metrics"].setdefault(name, None)
    return {node: {"hardware_key": "%s-%s-%s" % (e["network"], e["tool"], "+".join(sorted(e["devices"]))),
                   "metrics": e["metrics"]} for node, e in out.items()}


def current_metrics(kind, result, facts=None):
    """{node: {hardware_key, metrics}} of one kind from the step's result (a dict for compute and nccl, the
    list of link figures for links). Raises ValueError naming the kind and what came instead (None, text):
    a result that is not one is no figure to judge, and must not pass nor crash."""
    wanted = list if kind == "links" else dict
    if kind not in KINDS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(KINDS), kind))
    if not isinstance(result, wanted):
        raise ValueError("the %s result must be a %s (the step's verdict), got %s" % (
            kind, "list of link figures" if kind == "links" else "mapping", json.dumps(result, default=str)[:80]))
    if kind == "compute":
        return compute_metrics(result)
    if kind == "nccl":
        return nccl_metrics(result, facts if isinstance(facts, dict) else {})
    return link_metrics(result)


def make_node_baseline(cluster, node, kind, current, recorded_at=None):
    """A baseline document for one node and kind; only figures figures.judge_figure accepts are kept."""
    return {"schema": SCHEMA, "cluster": cluster, "node": node, "kind": kind,
            "hardware_key": current["hardware_key"], "recorded_at": recorded_at,
            "metrics": {k: v for k, v in current["metrics"].items() if judge_figure(v, k, unit_of(k))[1] is None}}


def read_document(text):
    """(parsed document or None, why it cannot be read or None); no text is no baseline, an empty one is
    broken; ``{"error": why}`` (a file that could not be read) is that reason."""
    if isinstance(text, dict):
        return None, text.get("error") or "it cannot be read"
    if text is None:
        return None, None
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, "it is not JSON: %s" % exc
    except RecursionError:
        # json recurses per level: a file nested thousands deep is no baseline, and must not crash the step.
        return None, "it is nested too deeply to be a baseline (%d characters)" % len(text)


def node_verdict(kind, cluster, current, stored_texts, tolerance=DEFAULT_TOLERANCE, store=False, recorded_at=None,
                 failed_nodes=()):
    """``{findings, comparisons, not_checked, to_store}`` for every node of one kind.

    ``current``: {node: {hardware_key, metrics}}; ``stored_texts``: {node: the stored file's text or None}.
    ``to_store`` holds the documents to write when ``store`` is set, for nodes that passed this step
    (not in ``failed_nodes``) and whose document passes its own checks.
    """
    findings, comparisons, not_checked, to_store = [], {}, [], {}
    for node in sorted(current):
        measured = current[node]
        document, error = read_document((stored_texts or {}).get(node))
        if document is None and error is None:
            not_checked.append({"check": "%s baseline" % kind, "node": node,
                                "reason": "no %s baseline stored for %s (store one from a good run with the "
                                          "role's store_baseline)" % (kind, node)})
        else:
            problems = [error] if error else _problems(document, node, kind, measured)
            if problems:
                findings.append(make_finding(
                    "NODE_BASELINE_UNUSABLE", "fail", node,
                    "the stored %s baseline of %s cannot be used: %s" % (kind, node, "; ".join(problems)),
                    "Fix the file, or remove it and store a new one from a good run (store_baseline=true)",
                    kind=kind))
            else:
                base = document["metrics"]
                if kind == "links":
                    base = {k: v for k, v in base.items() if k.startswith("loopback.") or k in measured["metrics"]}
                comparisons[node] = compare_metrics(measured["metrics"], base, tolerance, missing_regresses=True)
                regressed = [c for c in comparisons[node] if c["regressed"]]
                if regressed:
                    findings.append(make_finding(
                        "NODE_REGRESSED", "fail", node,
                        "%s of %s regressed against its own baseline: %s" % (
                            kind, node, "; ".join(c["message"] for c in regressed)),
                        "Compare with the run the baseline came from (its recorded_at); check the parts the "
                        "metrics name (GPU, HCA, link) for throttling, errors and firmware changes",
                        value={c["metric"]: c["current"] for c in regressed},
                        threshold={c["metric"]: c["baseline"] for c in regressed}, kind=kind))
        if store and node not in failed_nodes:
            candidate = make_node_baseline(cluster, node, kind, measured, recorded_at)
            if not _problems(candidate, node, kind, measured):
                to_store[node] = candidate
    return {"findings": findings, "comparisons": comparisons, "not_checked": not_checked, "to_store": to_store}


def _problems(document, node, kind, measured):
    expected = {"node": node, "kind": kind, "hardware_key": measured["hardware_key"]}
    problems = document_problems(document, SCHEMA, REQUIRED_KEYS, expected)
    if isinstance(document, dict) and "metrics" in document:
        problems.extend(metric_problems(document["metrics"]))
    return problems
