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
from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import (
    figure_finding, judge_figure, missing, missing_finding)
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


def _figure(value, peak, key, label, unit):
    """One figure beside its datasheet peak; a figure that is no figure (figures.judge_figure) is kept as
    None with its ``problem``, which the verdict fails."""
    figure, problem = judge_figure(value, label, unit, zero_ok=True)
    entry = {key: figure, "peak_" + key: peak,
             "efficiency": round(figure / peak, 4) if peak and figure is not None else None}
    if problem:
        entry["problem"] = problem
    return entry


def _gpu_records(node, lines):
    """One record per device line: its figures with the datasheet peak and the efficiency beside each."""
    records = []
    for line in lines:
        record = {"node": node, "device": line["device"], "index": line.get("index"), "name": line.get("name"),
                  "bus_id": line.get("bus_id"), "gemm": {}, "memory": None, "skipped": dict(line.get("gemm_skipped") or {})}
        row = peak_row(line.get("name")) if line["device"] == "cuda" else None
        record["model_key"] = row["model_key"] if row else None
        record["source"] = row["source"] if row else None
        label = "GPU %s" % record["index"] if line["device"] == "cuda" else "CPU"
        gemm = line.get("gemm_tflops")
        for dtype, tflops in sorted((gemm if isinstance(gemm, dict) else {}).items()):
            record["gemm"][dtype] = _figure(tflops, row["dense_tflops"].get(dtype) if row else None, "tflops",
                                            "%s %s GEMM" % (label, dtype), "TFLOPS")
        record["memory"] = _figure(line.get("copy_gbps"), row["memory_gbps"] if row else None, "gbps",
                                   "%s memory copy%s" % (label, " (%s)" % line["copy_error"] if line.get("copy_error") else ""),
                                   "GB/s")
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


def _expected_count(expected_gpus, node):
    """The GPUs ``node`` should report: ``expected_gpus`` is {node: count} or one count for every node;
    None (or 0) when unknown."""
    count = expected_gpus.get(node) if isinstance(expected_gpus, dict) else expected_gpus
    figure = judge_figure(count, "expected GPU count", bounds=(1, 4096))[0]
    return int(figure) if figure is not None and figure == int(figure) else None


def _missing_gpus(node, records, expected):
    """(FIGURE_MISSING findings, not_checked) for the GPUs of ``node`` that printed no line: every index below
    the expected count, else the gaps below the highest index seen (the last GPU's absence is then said to
    be unchecked, never passed)."""
    indexes = [r["index"] for r in records if r["device"] == "cuda"]
    if not indexes:
        # torch saw no GPU: CPU figures, labelled and not judged (compute_verdict says so); GPUs the node has
        # are named unmeasured.
        return [], [{"check": "per-GPU compute and memory", "node": node, "reason": (
            "GPU count: not checked: torch saw none of the %d GPU(s) gpu_info lists (a CPU-only torch, or a "
            "driver/CUDA mismatch)" % expected)}] if expected else []
    whole = [i for i in indexes if isinstance(i, int) and not isinstance(i, bool)]
    top = expected if expected else max(whole or [0]) + 1
    basis = "%d expected" % top if expected else "indexes up to %d seen" % (top - 1)
    findings = [missing_finding(
        node, "GPU %s printed no figure (torch measured %d GPU(s), %s)" % (index, len(indexes), basis),
        "Check that GPU %s is visible to torch and nvidia-smi (dmesg Xid, nvidia-smi -q -i %s); rerun the benchmark"
        % (index, index), gpu_index=index, threshold=top, metric="gpu_count") for index in missing(range(top), whole)]
    not_checked = [] if expected else [{"check": "GPU count", "node": node, "reason": (
        "GPU count: not checked (no expected count for %s from gpu_info or gpufleet_expected_gpu_count), so "
        "a missing last GPU cannot be seen" % node)}]
    return findings, not_checked


def _judge_gpu(r, medians, min_peak_fraction, slow_fraction):
    """(findings, not_checked) for one GPU record."""
    findings, not_checked = [], []
    if r["model_key"] is None:
        not_checked.append({"check": "datasheet comparison", "node": r["node"],
                            "reason": "no datasheet row for %s in gpu_peaks.py" % r["name"]})
    for dtype, reason in sorted(r["skipped"].items()):
        not_checked.append({"check": "%s GEMM" % dtype, "node": r["node"], "reason": "GPU %s: %s" % (r["index"], reason)})
    group = r["model_key"] or r["name"]
    figures = [(dtype, f, f["tflops"], f["peak_tflops"]) for dtype, f in sorted(r["gemm"].items())]
    figures.append(("memory", r["memory"], r["memory"]["gbps"], r["memory"]["peak_gbps"]))
    for metric, entry, figure, peak in figures:
        if entry.get("problem"):
            findings.append(figure_finding(
                r["node"], entry["problem"], "Rerun the benchmark on the idle node and read its output; a GPU that "
                "yields no figure is as suspect as a slow one", gpu_index=r["index"], gpu_bus_id=r.get("bus_id"),
                metric=metric))
            continue
        finding = _gpu_finding(r, metric, figure, peak, medians.get((group, metric)), min_peak_fraction, slow_fraction)
        findings += [finding] if finding else []
    return findings, not_checked


def compute_verdict(nodes, runs, min_peak_fraction=DEFAULT_MIN_PEAK_FRACTION, slow_fraction=DEFAULT_SLOW_FRACTION,
                    expected_gpus=None):
    """Judge every node's microbenchmark: ``{gpus, cpus, findings, not_checked, summary}``.

    ``runs`` maps node -> ``{stdout, rc, stderr}`` (or ``{reason}`` when it did not run). Each GPU's GEMM
    (per dtype) and memory figure is compared with its model's datasheet peak (gpu_peaks.py) and with the
    median of the same model's GPUs in the cluster, which names the slow GPU. A figure that is no figure
    (figures.judge_figure: NaN, text, absurd) fails its GPU (FIGURE_INVALID); a GPU below ``expected_gpus``
    ({node: count} or one count) that printed no line fails too (FIGURE_MISSING). A node without a GPU
    torch can use reports CPU figures, labelled as such and never compared with a GPU datasheet.
    """
    records, not_checked, findings = [], [], []
    for node in nodes:
        run = runs.get(node) if isinstance(runs.get(node), dict) else {"reason": "no run result: %r" % (runs.get(node),)}
        lines = parse_microbench(run.get("stdout") if isinstance(run.get("stdout"), str) else "")
        if not lines:
            not_checked.append({"check": "per-GPU compute and memory", "node": node,
                                "reason": run.get("reason") or "the benchmark printed no figure (rc %s): %s" % (
                                    run.get("rc"), str(run.get("stderr") or run.get("stdout") or "")[-300:].strip())})
            continue
        mine = _gpu_records(node, lines)
        absent, unchecked = _missing_gpus(node, mine, _expected_count(expected_gpus, node))
        records, findings, not_checked = records + mine, findings + absent, not_checked + unchecked
    medians = _medians(records)
    for r in records:
        if r["device"] == "cpu":
            not_checked.append({"check": "per-GPU compute and memory", "node": r["node"],
                                "reason": "no GPU torch can use: CPU figures (%s) reported, not compared with a GPU "
                                          "datasheet" % r["name"]})
            continue
        gpu_findings, gpu_not_checked = _judge_gpu(r, medians, min_peak_fraction, slow_fraction)
        findings, not_checked = findings + gpu_findings, not_checked + gpu_not_checked
    return {"gpus": [r for r in records if r["device"] == "cuda"], "cpus": [r for r in records if r["device"] == "cpu"],
            "findings": findings, "not_checked": _unique(not_checked), "summary": [_compute_line(r) for r in records]}


def _compute_line(record):
    gemm = ", ".join("%s %s TFLOPS%s" % (d, "%.1f" % f["tflops"] if f["tflops"] is not None else "no figure",
                                         " (%.0f %%)" % (100 * f["efficiency"]) if f["efficiency"] else "")
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
