# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Per-GPU GEMM and memory figures (gpufleet_microbench lines) judged against the datasheet and the
cluster: pure functions (roles/gpu_benchmark, compute step).

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

Each GPU's GEMM TFLOPS per dtype and its memory-copy GB/s are set beside its model's datasheet peak
(gpu_peaks.py) as an efficiency, and judged two ways: below ``slow_fraction`` (0.8) of the median of the
same model's GPUs in the cluster names the slow GPU (imbue and Azure compare a node's parts with each
other the same way); below ``min_peak_fraction`` (0.5) of the datasheet fails a GPU even when all are
equally slow (a large dense GEMM reaches 70-87 % of the datasheet, stas00/ml-engineering MAMF table;
0.5 leaves room for the benchmark's fixed shape). A node without a GPU torch can use reports its CPU
figures, labelled as CPU figures and never compared with a GPU datasheet.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth import median
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_peaks import peak_row
DEFAULT_MIN_PEAK_FRACTION = 0.5
DEFAULT_SLOW_FRACTION = 0.8


def parse_microbench(text):
    """The JSON lines of gpufleet_microbench (one per device); other lines are ignored."""
    lines = []
    for raw in (text or "").splitlines():
        raw = raw.strip()
        if raw.startswith("{"):
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("device") in ("cuda", "cpu"):
                lines.append(doc)
    return lines


def _gpu_records(node, lines):
    """One record per device line: its figures with the datasheet peak and the efficiency beside each."""
    records = []
    for line in lines:
        record = {"node": node, "device": line["device"], "index": line.get("index"), "name": line.get("name"),
                  "bus_id": line.get("bus_id"), "gemm": {}, "memory": None, "skipped": dict(line.get("gemm_skipped") or {})}
        row = peak_row(line.get("name")) if line["device"] == "cuda" else None
        record["model_key"] = row["model_key"] if row else None
        record["source"] = row["source"] if row else None
        for dtype, tflops in sorted((line.get("gemm_tflops") or {}).items()):
            peak = row["dense_tflops"].get(dtype) if row else None
            record["gemm"][dtype] = {"tflops": tflops, "peak_tflops": peak,
                                     "efficiency": round(tflops / peak, 4) if peak and tflops is not None else None}
        gbps = line.get("copy_gbps")
        peak = row["memory_gbps"] if row else None
        record["memory"] = {"gbps": gbps, "peak_gbps": peak,
                            "efficiency": round(gbps / peak, 4) if peak and gbps is not None else None}
        records.append(record)
    return records


def _medians(records):
    """{(model_key, metric): median figure} over every GPU of the cluster (metric: a dtype or 'memory')."""
    groups = {}
    for r in records:
        if r["device"] != "cuda":
            continue
        for dtype, figure in r["gemm"].items():
            groups.setdefault((r["model_key"] or r["name"], dtype), []).append(figure["tflops"])
        groups.setdefault((r["model_key"] or r["name"], "memory"), []).append(r["memory"]["gbps"])
    return {key: median(values) for key, values in groups.items()}


def _gpu_finding(record, metric, figure, peak, cluster_median, min_peak_fraction, slow_fraction):
    """GPU_{GEMM,MEMORY}_SLOW (below slow_fraction of the cluster's median for the model) or
    ..._BELOW_PEAK (below min_peak_fraction of the datasheet), else None."""
    kind = "MEMORY" if metric == "memory" else "GEMM"
    unit = "GB/s" if metric == "memory" else "TFLOPS"
    what = "memory copy" if metric == "memory" else "%s GEMM" % metric
    if figure is None:
        return None
    against_peak = " (%.0f %% of the datasheet's %s %s)" % (100.0 * figure / peak, peak, unit) if peak else ""
    if cluster_median and figure < slow_fraction * cluster_median:
        code, limit = "GPU_%s_SLOW" % kind, slow_fraction * cluster_median
        why = "below %.0f %% of the median of this model's GPUs in the cluster (%.1f %s)" % (
            slow_fraction * 100, cluster_median, unit)
    elif peak and figure < min_peak_fraction * peak:
        code, limit = "GPU_%s_BELOW_PEAK" % kind, min_peak_fraction * peak
        why = "below %.0f %% of the datasheet's %s %s" % (min_peak_fraction * 100, peak, unit)
    else:
        return None
    return make_finding(
        code, "fail", record["node"],
        "GPU %s (%s) %s: %.1f %s is %s%s" % (record["index"], record["name"], what, figure, unit, why, against_peak),
        "Check the GPU's clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE,CLOCK), power and cooling, "
        "PCIe/NVLink errors; rerun on the idle node; replace the part if it stays slow",
        value=round(figure, 3), threshold=round(limit, 3), gpu_index=record["index"], gpu_bus_id=record.get("bus_id"),
        metric=metric)


def compute_verdict(nodes, runs, min_peak_fraction=DEFAULT_MIN_PEAK_FRACTION, slow_fraction=DEFAULT_SLOW_FRACTION):
    """Judge every node's microbenchmark: ``{gpus, cpus, findings, not_checked, summary}``.

    ``runs`` maps node -> ``{stdout, rc, stderr}`` (or ``{reason}`` when it did not run). Each GPU's GEMM
    (per dtype) and memory figure is compared with its model's datasheet peak (gpu_peaks.py) and with the
    median of the same model's GPUs in the cluster, which names the slow GPU. A node without a GPU torch
    can use reports CPU figures, labelled as such and never compared with a GPU datasheet.
    """
    records, not_checked = [], []
    for node in nodes:
        run = runs.get(node) or {}
        lines = parse_microbench(run.get("stdout"))
        if not lines:
            not_checked.append({"check": "per-GPU compute and memory", "node": node,
                                "reason": run.get("reason") or "the benchmark printed no figure (rc %s): %s" % (
                                    run.get("rc"), (run.get("stderr") or run.get("stdout") or "")[-300:].strip())})
            continue
        records += _gpu_records(node, lines)
    medians = _medians(records)
    findings = []
    for r in records:
        if r["device"] == "cpu":
            not_checked.append({"check": "per-GPU compute and memory", "node": r["node"],
                                "reason": "no GPU torch can use: CPU figures (%s) reported, not compared with a GPU "
                                          "datasheet" % r["name"]})
            continue
        if r["model_key"] is None:
            not_checked.append({"check": "datasheet comparison", "node": r["node"],
                                "reason": "no datasheet row for %s in gpu_peaks.py" % r["name"]})
        for dtype, reason in sorted(r["skipped"].items()):
            not_checked.append({"check": "%s GEMM" % dtype, "node": r["node"], "reason": "GPU %s: %s" % (r["index"], reason)})
        group = r["model_key"] or r["name"]
        for dtype, figure in r["gemm"].items():
            finding = _gpu_finding(r, dtype, figure["tflops"], figure["peak_tflops"], medians.get((group, dtype)),
                                   min_peak_fraction, slow_fraction)
            findings += [finding] if finding else []
        finding = _gpu_finding(r, "memory", r["memory"]["gbps"], r["memory"]["peak_gbps"], medians.get((group, "memory")),
                               min_peak_fraction, slow_fraction)
        findings += [finding] if finding else []
    return {"gpus": [r for r in records if r["device"] == "cuda"], "cpus": [r for r in records if r["device"] == "cpu"],
            "findings": findings, "not_checked": _unique(not_checked), "summary": [_compute_line(r) for r in records]}


def _compute_line(record):
    gemm = ", ".join("%s %.1f TFLOPS%s" % (d, f["tflops"], " (%.0f %%)" % (100 * f["efficiency"]) if f["efficiency"] else "")
                     for d, f in sorted(record["gemm"].items()))
    memory = record["memory"]
    mem = "copy %s GB/s%s" % (memory["gbps"], " (%.0f %%)" % (100 * memory["efficiency"]) if memory["efficiency"] else "")
    label = "CPU (%s)" % record["name"] if record["device"] == "cpu" else "GPU %s %s" % (record["index"], record["name"])
    return "%s %s: %s; %s" % (record["node"], label, gemm or "no GEMM", mem)


def _unique(entries):
    seen, out = set(), []
    for entry in entries:
        key = json.dumps(entry, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out
