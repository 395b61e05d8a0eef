# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Smoke test: the report rendered (pure functions): JUnit XML and Markdown through the one report
writer (report_writer.py), and the busbw-vs-size SVG chart. No Ansible import, no I/O.
"""

from __future__ import absolute_import, division, print_function

import math

try:
    from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer
    from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_parse import _fmt, human_bytes, slug
except ImportError:  # pragma: no cover - loaded by path from tests/gpu without the collection
    import report_writer  # type: ignore
    from smoke_parse import _fmt, human_bytes, slug  # type: ignore

__metaclass__ = type


def junit_cases(report):
    """The verdict's checks as report cases: a check's message is its detail whatever its status."""
    return [report_writer.make_case(c["name"], c["status"], c["message"], c["message"]) for c in report["verdict"]["checks"]]


def render_junit(report):
    """JUnit XML: one test case per check; fail -> <failure>, skip -> <skipped>."""
    props = [("backend", report["backend"]), ("world_size", report["world_size"]), ("nnodes", report["nnodes"]),
             ("hardware_key", report["hardware_key"])]
    props += [("version." + k, v) for k, v in sorted((report.get("versions") or {}).items()) if v]
    return report_writer.render_junit("gpufleet.smoke.%s" % slug(report["cluster"]), junit_cases(report),
                                      title="gpufleet smoke", properties=props, failure_type="SmokeCheckFailed")


def _nice_step(span, target=5):
    raw = span / float(target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * mag:
            return mult * mag
    return 10 * mag


def render_svg(report, baseline=None, width=760, height=420):
    """Line chart of busbw (GB/s) against message size (log2 axis): this run and the baseline."""
    rows = (report.get("sweep") or {}).get("rows") or []
    series = [("this run (%s)" % report["backend"], "#1f77b4", "", [(r["size_bytes"], r["busbw_gbps"]) for r in rows])]
    if baseline and baseline.get("sweep"):
        series.append(("baseline %s" % (baseline.get("recorded_at") or ""), "#d62728", "6 4",
                       [(r["size_bytes"], r["busbw_gbps"]) for r in baseline["sweep"]]))
    left, right, top, bottom = 70, 20, 40, 60
    pw, ph = width - left - right, height - top - bottom
    points = [p for s in series for p in s[3] if p[0] > 0 and p[1] is not None]
    title = "all-reduce busbw vs message size - %s, %s ranks, %s" % (report["cluster"], report["world_size"], report["backend"])
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">'
           % (width, height, width, height),
           '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (width, height),
           '<text x="%d" y="20" font-size="13" text-anchor="middle">%s</text>' % (width // 2, report_writer.xml_text(title))]
    if not points:
        out.append('<text x="%d" y="%d" text-anchor="middle">no sweep data</text>' % (width // 2, height // 2))
        out.append("</svg>")
        return "\n".join(out) + "\n"
    xs = [math.log2(p[0]) for p in points]
    xmin, xmax = math.floor(min(xs)), math.ceil(max(xs))
    if xmax == xmin:
        xmax = xmin + 1
    ymax = max(p[1] for p in points)
    step = _nice_step(ymax if ymax > 0 else 1.0)
    ytop = step * math.ceil((ymax if ymax > 0 else 1.0) / step)

    def px(size):
        return left + (math.log2(size) - xmin) / (xmax - xmin) * pw

    def py(value):
        return top + ph - (value / ytop) * ph

    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (left, top, pw, ph))
    y = 0.0
    while y <= ytop + 1e-9:
        yy = py(y)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, yy, left + pw, yy))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, yy + 4, _fmt(y, 3 if ytop < 0.1 else (2 if ytop < 10 else 0))))
        y += step
    every = max(1, int(math.ceil((xmax - xmin) / 10.0)))
    for e in range(xmin, xmax + 1, every):
        xx = px(2 ** e)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (xx, top, xx, top + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (xx, top + ph + 16, report_writer.xml_text(human_bytes(2 ** e))))
    out.append('<text x="%d" y="%d" text-anchor="middle">message size (bytes, log scale)</text>' % (left + pw // 2, height - 18))
    out.append('<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">busbw (GB/s, 1 GB = 1e9 B)</text>'
               % (top + ph // 2, top + ph // 2))
    for i, (label, colour, dash, pts) in enumerate(series):
        pts = [p for p in pts if p[0] > 0 and p[1] is not None]
        if not pts:
            continue
        path = " ".join("%.1f,%.1f" % (px(s), py(v)) for s, v in sorted(pts))
        out.append('<polyline class="series-%d" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (
            i, colour, ' stroke-dasharray="%s"' % dash if dash else "", path))
        for s, v in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s: %s GB/s</title></circle>'
                       % (px(s), py(v), colour, report_writer.xml_text(human_bytes(s)), _fmt(v, 3)))
        ly = top + 14 + i * 16
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            left + 10, ly - 4, left + 34, ly - 4, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        out.append('<text x="%d" y="%d">%s</text>' % (left + 40, ly, report_writer.xml_text(label)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render_markdown(report, chart_file="smoke_busbw.svg", baseline=None):
    v = report["verdict"]
    status = "PASSED" if v["passed"] else "FAILED"
    ver = report.get("versions") or {}
    lines = ["# Smoke test: %s - %s" % (report["cluster"], status), ""]
    if v["reasons"]:
        lines.append("**Why it failed:**")
        lines.append("")
        lines.extend("- %s" % r for r in v["reasons"])
        lines.append("")
    lines += [
        "| | |", "|---|---|",
        "| nodes | %d: %s |" % (report["nnodes"], ", ".join(report["hosts_expected"])),
        "| world size | %s (%s per node) |" % (report["world_size"], report["nproc_per_node"]),
        "| backend | **%s** on %s |" % (report["backend"], report["device"]),
        "| hardware | %s (`%s`) |" % (report.get("gpu_model") or "CPU", report["hardware_key"]),
        "| transports | %s |" % (", ".join(report.get("transports") or []) or "-"),
        "| driver / CUDA | %s / %s |" % (ver.get("driver") or "-", ver.get("cuda") or "-"),
        "| NCCL / torch | %s / %s |" % (ver.get("nccl") or "-", ver.get("torch") or "-"),
        "",
        "## Checks", "",
    ]
    lines += report_writer.markdown_case_table(junit_cases(report))
    lines.append("")
    if report.get("missing_nodes"):
        lines += ["## Nodes that did not take part", ""]
        lines += ["- **%s**: %s" % (m["node"], m["reason"]) for m in report["missing_nodes"]]
        lines.append("")
    lines += _markdown_sweep(report, chart_file, baseline)
    lines += _markdown_training(report)
    lines += _markdown_baseline(report)
    lines += _markdown_nodes(report)
    for note in report.get("notes") or []:
        lines.append("> %s" % note)
    return "\n".join(lines) + "\n"


def _markdown_sweep(report, chart_file, baseline):
    lines = []
    sweep = report.get("sweep")
    if sweep:
        base = {}
        if baseline:
            base = {r["size_bytes"]: r["busbw_gbps"] for r in baseline.get("sweep") or []}
        lines += ["## All-reduce sweep", "",
                  "busbw = algbw x 2(n-1)/n = algbw x %s for n = %s; GB = 1e9 bytes; large-message busbw %s GB/s "
                  "(sizes >= %s)." % (_fmt(sweep["bus_factor"], 4), report["world_size"], _fmt(sweep["busbw_large_gbps"], 3),
                                      human_bytes(sweep["large_message_bytes"])),
                  "", "![busbw vs message size](%s)" % chart_file, "",
                  "| size | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong | baseline busbw |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for r in sweep["rows"]:
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                human_bytes(r["size_bytes"]), _fmt(r["time_us"], 1), _fmt(r["algbw_gbps"], 3), _fmt(r["busbw_gbps"], 3),
                r.get("wrong"), _fmt(base.get(r["size_bytes"]), 3)))
        lines.append("")
    return lines


def _markdown_training(report):
    lines = []
    t = report.get("training")
    if t:
        hp = report.get("hparams") or {}
        lines += ["## Training", "",
                  "%s, %s steps, per-GPU batch %s, global batch %s, lr %s%s." % (
                      t["model"], t["steps"], t["per_gpu_batch"], t["global_batch"], _fmt(t["lr"], 4),
                      " (scaled: %s)" % "; ".join(hp.get("warnings") or []) if hp.get("warnings") else ""),
                  "",
                  "| loss first | loss last | drop | NaN/Inf | params in sync | step (ms) | steps/s | samples/s |",
                  "|---:|---:|---:|---:|---|---:|---:|---:|",
                  "| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                      _fmt(t["loss_first"], 4), _fmt(t["loss_last"], 4), _fmt(t["loss_drop"], 3), t["nonfinite_values"],
                      "yes" if t["params_in_sync"] else "NO", _fmt(t["step_time_ms"], 2), _fmt(t["steps_per_s"], 1),
                      _fmt(t["samples_per_s"], 0)),
                  ""]
        mfu = t.get("mfu") or {}
        if mfu:
            lines += ["MFU: %s (model %s TFLOPS in %s over %s GPU(s) x %s TFLOPS dense datasheet peak)%s." % (
                "%.4f %%" % (mfu["value"] * 100) if mfu["value"] is not None else "not computed",
                _fmt(mfu["model_tflops"], 4), mfu["dtype"], mfu["gpus"], _fmt(mfu["peak_tflops_per_gpu"], 1),
                ": %s" % mfu["reason"] if mfu["reason"] else ""), ""]
    return lines


def _markdown_baseline(report):
    lines = []
    b = report.get("baseline") or {}
    if b.get("comparison"):
        lines += ["## Baseline", "", "| metric | this run | baseline | change |", "|---|---:|---:|---:|"]
        for c in b["comparison"]:
            change = "-" if c["change"] is None else "%+.1f %%" % (c["change"] * 100)
            lines.append("| %s | %s | %s | %s |" % (c["metric"], _fmt(c["current"], 3), _fmt(c["baseline"], 3), change))
        lines.append("")
    return lines


def _markdown_nodes(report):
    lines = ["## Nodes", "", "| node | address | procs | status | GPUs | inter-node | detail |", "|---|---|---:|---|---:|---|---|"]
    for n in report["nodes"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            n["name"], n.get("address") or "-", n.get("nproc") or "-", n["status"], _fmt(n.get("gpu_count")),
            n.get("inter_node") or "-", (n.get("error") or "").replace("|", "\\|")))
    lines.append("")
    return lines
