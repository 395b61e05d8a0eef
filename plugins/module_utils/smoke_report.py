# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Smoke-test report: assemble, judge, compare with a baseline, render (pure functions).

Input is what the smoke_test role collects: per node the plan (address, processes, GPU facts,
what torch sees) and the JSON the job launcher printed (roll call, torchrun exit, NCCL INFO
lines, and on one node the job result). Output is one report dict with a verdict, rendered as
JSON, JUnit XML, Markdown and an SVG chart. No Ansible import, no I/O: the action plugin and
tests/gpu/ do the reading and writing.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import re
from xml.sax.saxutils import escape

try:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_tests import (
        bus_factor, parse_nccl_tests)
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import lookup_model
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_peaks import peak_tflops
    from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer
except ImportError:  # pragma: no cover - loaded by path from tests/gpu without the collection
    from nccl_tests import bus_factor, parse_nccl_tests  # type: ignore
    from gpu_models import lookup_model  # type: ignore
    from gpu_peaks import peak_tflops  # type: ignore
    import report_writer  # type: ignore

__metaclass__ = type

REPORT_SCHEMA = "gpufleet.smoke/1"
BASELINE_SCHEMA = "gpufleet.smoke.baseline/1"

# Single-node all-reduce busbw floors at large messages, GB/s (GB = 1e9 B), 8 GPUs per node.
# H100: Azure aznhc ND H100 v5 requires >= 460 at 16 GiB (the NVLink4 limit is 18 x 26.562 =
# ~478 GB/s per direction; 8x H100 measure ~480). H200: aznhc ND H200 v5 conf 431. A100 SXM:
# aznhc NDv4 230 (12 NVLink3 x 25 GB/s = 300). Multi-node floors are derived (see
# busbw_threshold) because they depend on the fabric, not the GPU.
BUSBW_TABLE = [
    {"models": ["h100-sxm5-80gb", "h100", "h800"], "gpus_per_node": 8, "min_busbw_gbps": 460.0,
     "source": "Azure aznhc ND H100 v5 (>= 460 GB/s, NVLink4 limit ~478)"},
    {"models": ["h200"], "gpus_per_node": 8, "min_busbw_gbps": 431.0,
     "source": "Azure aznhc ND H200 v5 conf (431 GB/s)"},
    {"models": ["a100-sxm4-40gb", "a100-sxm4-80gb", "a100"], "gpus_per_node": 8, "min_busbw_gbps": 230.0,
     "source": "Azure aznhc NDv4 (230 GB/s, 12 NVLink3 x 25 GB/s)"},
]
# DCGM's rule (75 % of a measured peak) applied to the per-node RDMA line rate.
MULTI_NODE_EFFICIENCY = 0.75

DEFAULT_THRESHOLDS = {
    "min_busbw_gbps": None,       # None: from BUSBW_TABLE / the fabric, or not judged
    "min_loss_drop": 0.3,         # loss must fall by >= 30 % between the first and last 10 % of steps
    "min_steps_per_s": {"nccl": 20.0, "gloo": 1.0},
    "min_samples_per_s": None,
}
DEFAULT_TOLERANCE = 0.10
LARGE_MESSAGE_BYTES = 256 * 1024 * 1024

_CHECK_ORDER = ["nodes_joined", "job_completed", "backend", "gpus_used", "sweep_rows", "allreduce_correct", "busbw_gbps",
                "nccl_transport", "loss_decreased", "finite_values", "params_in_sync", "steps_per_s",
                "samples_per_s", "nccl_tests", "baseline"]


# ------------------------------------------------------------------------------------------
# small helpers


def slug(text):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    out = re.sub(r"[^a-z0-9]+", "-", str(text or "").lower()).strip("-")
    return out or "unknown"


def human_bytes(n):
    """8 -> '8 B', 1048576 -> '1 MiB'."""
    n = int(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def _fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return ("%." + str(digits) + "f") % value
    return str(value)


# ------------------------------------------------------------------------------------------
# NCCL_DEBUG=INFO


_NCCL_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+(?:\.\d+)?))?")
_USING_NETWORK_RE = re.compile(r"NCCL INFO Using network (\S+(?: \S+)?)")
_NET_IB_RE = re.compile(r"NET/IB\s*:\s*Using\s+(.*)")
_IB_DEV_RE = re.compile(r"\[\d+\]([\w.-]+):(\d+)/(IB|RoCE)")
_NET_SOCKET_RE = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)")
_CHANNEL_RE = re.compile(r"Channel \d+/\d+ : .* via (\S+)")


def parse_nccl_debug(lines):
    """NCCL_DEBUG=INFO lines -> {version, cuda, networks, ib_devices, transports, inter_node, gdr, warnings}.

    ``transports`` is the set of paths NCCL really connected channels over: P2P, SHM, NVLS,
    CollNet, NET/IB, NET/RoCE, NET/Socket (and NET/<plugin>). ``inter_node`` is IB, RoCE,
    Socket, the plugin name, or None when no channel crossed a network (one node).
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    out = {"version": None, "cuda": None, "networks": [], "ib_devices": [], "socket_devices": [],
           "transports": [], "inter_node": None, "gdr": False, "warnings": []}
    transports = set()
    link_layers = {}
    for line in lines or []:
        m = _NCCL_VERSION_RE.search(line)
        if m and out["version"] is None:
            out["version"], out["cuda"] = m.group(1), m.group(2)
        m = _USING_NETWORK_RE.search(line)
        if m and m.group(1) not in out["networks"]:
            out["networks"].append(m.group(1))
        m = _NET_IB_RE.search(line)
        if m:
            for dev, port, layer in _IB_DEV_RE.findall(m.group(1)):
                link_layers[dev] = layer
                entry = {"device": dev, "port": int(port), "link_layer": layer}
                if entry not in out["ib_devices"]:
                    out["ib_devices"].append(entry)
        m = _NET_SOCKET_RE.search(line)
        if m:
            for dev in re.findall(r"\[\d+\]([\w.:-]+?)(?::[\d.]+)?<", m.group(1)):
                if dev not in out["socket_devices"]:
                    out["socket_devices"].append(dev)
        if "NCCL WARN" in line:
            text = line.split("NCCL WARN", 1)[1].strip()
            if text not in out["warnings"] and len(out["warnings"]) < 50:
                out["warnings"].append(text)
        if "NVLS" in line and ("NVLS comm" in line or "via NVLS" in line or "Connected NVLS" in line):
            transports.add("NVLS")
        m = _CHANNEL_RE.search(line)
        if m:
            path = m.group(1)
            head = path.split("/")
            if head[0] == "P2P":
                transports.add("P2P")
            elif head[0] == "SHM":
                transports.add("SHM")
            elif head[0] == "NVLS":
                transports.add("NVLS")
            elif head[0].upper() == "COLLNET":
                transports.add("CollNet")
            elif head[0] == "NET" and len(head) > 1:
                kind = head[1]
                if kind == "IB":
                    layers = set(link_layers.values())
                    kind = "RoCE" if layers == {"RoCE"} else "IB"
                transports.add("NET/" + kind)
                if "GDRDMA" in path:
                    out["gdr"] = True
    out["transports"] = sorted(transports)
    nets = [t.split("/", 1)[1] for t in out["transports"] if t.startswith("NET/")]
    if nets:
        # The slowest one wins: a single node on sockets drags every ring through TCP.
        for pick in ("Socket", "RoCE", "IB"):
            if pick in nets:
                out["inter_node"] = pick
                break
        else:
            out["inter_node"] = nets[0]
    return out


# ------------------------------------------------------------------------------------------
# who is missing


def diagnose_rollcall(expected, views):
    """Name the nodes a failed roll call points at.

    ``views``: {node: roll-call view or None}. A node is named when it reached none of its peers
    and every peer that reported could not reach it (a cut link), when most peers could not reach
    it, or when it never reported at all. Returns [{node, reason}] in inventory order.
    """
    findings = []
    for node in expected:
        others = [o for o in expected if o != node]
        if not others:
            continue
        view = views.get(node)
        reporters = [o for o in others if views.get(o)]
        complaints = [o for o in reporters
                      if node in (views[o].get("unreachable") or []) or node in (views[o].get("not_heard_from") or [])]
        if view is None:
            if reporters and complaints:
                findings.append({"node": node, "reason": "never joined: %s could not reach it and it reported nothing"
                                 % ", ".join(complaints)})
            continue
        if not reporters:
            # Every peer is silent: they are the ones to name, not this node.
            continue
        reached_none = not set(view.get("reached") or []) & set(reporters)
        if reached_none and len(complaints) == len(reporters):
            reason = "cut off: reached none of its %d peer(s)" % len(others)
            if complaints:
                reason += "; %s could not reach it" % ", ".join(complaints)
            findings.append({"node": node, "reason": reason})
        elif reporters and len(complaints) * 2 > len(reporters):
            findings.append({"node": node, "reason": "unreachable from %s" % ", ".join(complaints)})
    if not findings:
        pairs = []
        for node in expected:
            view = views.get(node) or {}
            for peer in view.get("unreachable") or []:
                pair = tuple(sorted((node, peer)))
                if pair not in pairs:
                    pairs.append(pair)
        for a, b in pairs:
            findings.append({"node": a, "reason": "cannot reach %s (link %s <-> %s)" % (b, a, b)})
    return findings


def _addresses_in(text):
    return set(re.findall(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])", text or ""))


# ------------------------------------------------------------------------------------------
# assemble


def hardware_key(model_key, gpus_per_node, nnodes, backend):
    """'h100-sxm5-80gb-x8-n2-nccl'; CPU runs: 'cpu-x1-n3-gloo'."""
    return "%s-x%s-n%s-%s" % (slug(model_key or "cpu"), gpus_per_node, nnodes, backend)


def baseline_filename(cluster, hw_key):
    return "smoke-%s--%s.json" % (slug(cluster), slug(hw_key))


def _gpu_model(nodes):
    names = []
    for n in nodes:
        gpu = n.get("gpu") or {}
        for g in gpu.get("gpus") or []:
            name = g.get("name") or g.get("product_name")
            if name:
                names.append(name)
        probe = n.get("probe") or {}
        names.extend(probe.get("devices") or [])
    if not names:
        return None, None
    name = names[0]
    model = lookup_model(name)
    return name, (model["key"] if model else slug(name))


def build_report(cluster, expected, nodes, outputs, backend, hparams=None, config=None, nccl_tests_logs=None,
                 started_at=None, notes=None):
    """Assemble the report (no verdict yet).

    expected: host names in inventory order (the play's hosts, also those Ansible could not reach).
    nodes: {host: {address, nproc, gpu (gpu_info result), probe (job probe), rdma_gbps}} for hosts
    that got as far as the launch. outputs: {host: launcher JSON dict or None}.
    """
    config = dict(config or {})
    present = [h for h in expected if h in nodes]
    result = None
    result_node = None
    for host in expected:
        out = outputs.get(host) or {}
        if out.get("result"):
            result, result_node = out["result"], host
            break
    gpu_name, model_key = _gpu_model([nodes[h] for h in present])
    nprocs = [int(nodes[h].get("nproc") or 0) for h in present]
    planned_world = sum(nprocs)
    world = result["world_size"] if result else planned_world
    gpus_per_node = max(nprocs) if nprocs else 0
    nnodes = len(expected)
    device = "gpu" if backend == "nccl" else "cpu"
    hw_key = hardware_key(model_key if backend == "nccl" else "cpu", gpus_per_node, nnodes, backend)

    node_rows = []
    all_nccl_lines = []
    views = {}
    views_after = {}
    for host in expected:
        info = nodes.get(host)
        out = outputs.get(host)
        row = {"name": host, "address": (info or {}).get("address"), "nproc": (info or {}).get("nproc"),
               "status": "ok", "rc": None, "timed_out": False, "error": None, "last_stages": {},
               "gpu_model": None, "gpu_count": None, "driver_version": None, "cuda_version": None,
               "torch": None, "inter_node": None, "transports": [], "log_tail": [],
               "pci_gpu_count": None, "torch_gpus": None, "rdma_gbps": None, "rollcall_s": None}
        if info:
            gpu = info.get("gpu") or {}
            probe = info.get("probe") or {}
            row.update({"gpu_count": gpu.get("driver_gpu_count") if gpu.get("status") == "ok" else 0,
                        "driver_version": gpu.get("driver_version"), "cuda_version": gpu.get("cuda_version"),
                        "gpu_status": gpu.get("status"), "torch": probe.get("torch"),
                        "torch_gpus": probe.get("cuda_device_count"),
                        "pci_gpu_count": gpu.get("pci_gpu_count"),
                        # This node's own active RDMA line rate (Gb/s); None when it has no port up.
                        "rdma_gbps": info.get("rdma_gbps")})
            gpus = gpu.get("gpus") or []
            if gpus:
                row["gpu_model"] = gpus[0].get("name")
        if info is None:
            row["status"] = "unreachable"
            row["error"] = (outputs.get(host) or {}).get("error") or "Ansible could not reach this node or its setup failed"
        elif not out or not isinstance(out, dict) or "node" not in out:
            row["status"] = "no_output"
            row["error"] = (out or {}).get("error") if isinstance(out, dict) else None
            row["error"] = row["error"] or "the launcher printed no result"
            row["log_tail"] = (out or {}).get("log_tail") or []
        else:
            views[host] = out.get("rollcall")
            views_after[host] = out.get("rollcall_after")
            # How long the roll call waited, by the job's own clock (a failed one waits the join timeout).
            row["rollcall_s"] = (out.get("rollcall") or {}).get("elapsed_s")
            row["rc"] = out.get("torchrun_rc")
            row["timed_out"] = bool(out.get("timed_out"))
            row["error"] = out.get("error")
            row["last_stages"] = out.get("last_stages") or {}
            row["log_tail"] = out.get("log_tail") or []
            if out.get("rollcall") and not out["rollcall"].get("ok"):
                row["status"] = "rollcall_failed"
            elif out.get("timed_out"):
                row["status"] = "timed_out"
            elif out.get("torchrun_rc") not in (0,):
                row["status"] = "failed"
            lines = out.get("nccl_lines") or []
            all_nccl_lines.extend(lines)
            parsed = parse_nccl_debug(lines)
            row["inter_node"] = parsed["inter_node"]
            row["transports"] = parsed["transports"]
        node_rows.append(row)

    nccl = parse_nccl_debug(all_nccl_lines) if backend == "nccl" else None
    joined = list(result["nodes"]) if result else []
    missing = []
    if result:
        errors = {r["name"]: r["error"] for r in node_rows if r["status"] != "ok" and r["error"]}
        for host in expected:
            if host not in joined:
                missing.append({"node": host, "reason": "%snot among the nodes in the job (joined: %s)" % (
                    errors[host] + "; " if host in errors else "", ", ".join(joined))})
    else:
        missing = diagnose_rollcall(expected, views)
        named = {m["node"] for m in missing}
        for row in node_rows:
            if row["status"] in ("unreachable", "no_output") and row["name"] not in named:
                missing.append({"node": row["name"], "reason": row["error"]})
                named.add(row["name"])
        if not missing and any(views_after.values()):
            # The roll call passed but the job failed: the one repeated after the failure shows
            # which node fell off mid-run.
            for m in diagnose_rollcall(expected, views_after):
                missing.append({"node": m["node"], "reason": "dropped during the job: " + m["reason"]})
        if not missing:
            # Roll call passed but the job failed: name nodes by their own failure, then by the
            # peer addresses their errors mention.
            addr_to_host = {r["address"]: r["name"] for r in node_rows if r["address"]}
            for row in node_rows:
                if row["status"] in ("failed", "timed_out"):
                    mentioned = sorted({addr_to_host[a] for a in _addresses_in("\n".join(row["log_tail"]))
                                        if a in addr_to_host and addr_to_host[a] != row["name"]})
                    stage = ", ".join(sorted(set(v for v in row["last_stages"].values() if v))) or "before start"
                    reason = "%s (last stage: %s)" % (row["error"] or row["status"], stage)
                    if mentioned:
                        reason += "; its errors mention %s" % ", ".join(mentioned)
                    missing.append({"node": row["name"], "reason": reason})
    sweep = None
    training = None
    versions = {"driver": None, "cuda": None, "nccl": None, "torch": None, "torch_cuda": None, "python": None}
    for row in node_rows:
        versions["driver"] = versions["driver"] or row["driver_version"]
        versions["cuda"] = versions["cuda"] or row["cuda_version"]
        versions["torch"] = versions["torch"] or row["torch"]
    if result:
        rv = result.get("versions") or {}
        versions["torch"] = rv.get("torch") or versions["torch"]
        versions["torch_cuda"] = rv.get("torch_cuda")
        versions["python"] = rv.get("python")
        versions["nccl"] = rv.get("nccl")
        rows = []
        factor = bus_factor("all_reduce", world) if world else None
        for r in (result.get("sweep") or {}).get("rows") or []:
            row = dict(r)
            time_us = r.get("time_us")
            if not isinstance(time_us, (int, float)) or isinstance(time_us, bool) or time_us <= 0:
                # A zero or missing time is not a bandwidth: the row is kept, marked, and fails the verdict.
                row["algbw_gbps"] = row["busbw_gbps"] = None
                row["invalid"] = "time_us is %r" % (time_us,)
            else:
                row["algbw_gbps"] = float(r["size_bytes"]) / (time_us / 1.0e6) / 1.0e9
                # Recomputed here from time and size, exactly as nccl-tests does.
                row["busbw_gbps"] = row["algbw_gbps"] * factor
            rows.append(row)
        large = int(config.get("large_message_bytes") or LARGE_MESSAGE_BYTES)
        sweep = dict(result.get("sweep") or {}, rows=rows, bus_factor=factor, large_message_bytes=large)
        sweep["busbw_large_gbps"] = large_busbw(rows, large)
        sweep["busbw_peak_gbps"] = max((r["busbw_gbps"] for r in rows if r["busbw_gbps"] is not None), default=None)
        sweep["wrong_total"] = sum(int(r.get("wrong") or 0) for r in rows)
        training = result.get("training")
        if training:
            training = dict(training, mfu=model_flops_utilization(training, gpu_name, backend, world))
    if nccl and nccl.get("version"):
        versions["nccl"] = nccl["version"]
        if nccl.get("cuda") and not versions["cuda"]:
            versions["cuda"] = nccl["cuda"]
    transports = nccl["transports"] if nccl else ["gloo/TCP"]
    # nccl_tests_logs: {host: log text} or {host: {"text": log, "rc": exit status}}.
    nt, nt_rc = {}, {}
    for host, log in (nccl_tests_logs or {}).items():
        text, rc = (log.get("text") or "", log.get("rc")) if isinstance(log, dict) else (log, None)
        if text or rc not in (None, ""):
            nt[host] = parse_nccl_tests(text) if text else []
            nt_rc[host] = None if rc in (None, "") else int(rc)
    report = {
        "schema": REPORT_SCHEMA,
        "cluster": cluster,
        "started_at": started_at,
        "hosts_expected": list(expected),
        "nodes_joined": joined,
        "missing_nodes": missing,
        "nnodes": nnodes,
        "world_size": world,
        "nproc_per_node": gpus_per_node,
        "backend": backend,
        "device": device,
        "gpu_model": gpu_name,
        "gpu_model_key": model_key if backend == "nccl" else None,
        "hardware_key": hw_key,
        "rank0_node": result_node,
        "versions": versions,
        "hparams": hparams,
        "sweep": sweep,
        "training": training,
        "nccl": nccl,
        "transports": transports,
        "nccl_tests": nt,
        "nccl_tests_rc": nt_rc,
        "nodes": node_rows,
        "notes": list(notes or []),
        "config": config,
    }
    return report


def model_flops_utilization(training, gpu_name, backend, world_size):
    """MFU of the job's model: ``{value, model_tflops, peak_tflops_per_gpu, dtype, gpus, source, reason}``.

    The model's FLOPs per second (the job's ``train_flops_per_sample`` x ``samples_per_s``: 6 per weight
    per sample, forward and backward) over the GPUs' dense datasheet peak in the dtype the model ran in
    (gpu_peaks.py) times the number of GPUs. ``value`` is None, with the reason, on a CPU (gloo) run, for a
    model without a datasheet row, or when the job reported no FLOPs; the achieved figure is kept.
    """
    flops, rate, dtype = training.get("train_flops_per_sample"), training.get("samples_per_s"), training.get("dtype")
    achieved = flops * rate / 1e12 if flops and rate else None
    out = {"value": None, "model_tflops": achieved, "peak_tflops_per_gpu": None, "dtype": dtype,
           "gpus": world_size, "source": None, "reason": None}
    if achieved is None:
        out["reason"] = "the job reported no model FLOPs or no samples/s"
    elif backend != "nccl":
        out["reason"] = "a CPU run (%s): model TFLOPS reported, no GPU datasheet to hold them to" % backend
    else:
        peak, source = peak_tflops(gpu_name, dtype)
        out["source"] = source
        if peak is None:
            out["reason"] = source
        else:
            out["peak_tflops_per_gpu"] = peak
            out["value"] = achieved / (peak * world_size)
    return out


def large_busbw(rows, large_bytes=LARGE_MESSAGE_BYTES):
    """Peak busbw over the sizes >= large_bytes (the largest size when none is that large)."""
    rows = [r for r in rows or [] if r.get("busbw_gbps") is not None]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r["size_bytes"])
    chosen = [r for r in rows if r["size_bytes"] >= large_bytes] or rows[-1:]
    return max(r["busbw_gbps"] for r in chosen)


# ------------------------------------------------------------------------------------------
# thresholds, baseline, verdict


def busbw_threshold(model_key, gpus_per_node, nnodes, backend, rdma_gbps_per_node=None):
    """(floor in GB/s or None, where it comes from)."""
    if backend != "nccl":
        return None, "not applicable on gloo (CPU run); set smoke_test_thresholds.min_busbw_gbps to judge it"
    if gpus_per_node * nnodes < 2:
        return None, "not applicable with one rank (all-reduce busbw is 0 by definition)"
    single = None
    source = None
    for entry in BUSBW_TABLE:
        if model_key in entry["models"] and int(gpus_per_node) == entry["gpus_per_node"]:
            single, source = entry["min_busbw_gbps"], entry["source"]
            break
    if nnodes <= 1:
        if single is None:
            return None, "no reference for %s x%s; set smoke_test_thresholds.min_busbw_gbps" % (model_key, gpus_per_node)
        return single, source
    if rdma_gbps_per_node:
        line = float(rdma_gbps_per_node) / 8.0  # Gb/s -> GB/s
        ceiling = min(line, single) if single else line
        return (MULTI_NODE_EFFICIENCY * ceiling,
                "%.0f %% of the per-node RDMA line rate %.0f Gb/s (= %.1f GB/s)%s"
                % (MULTI_NODE_EFFICIENCY * 100, rdma_gbps_per_node, line,
                   ", capped by the single-node floor" if single and single < line else ""))
    return None, "multi-node without a known RDMA line rate; set smoke_test_thresholds.min_busbw_gbps"


def cluster_rdma_gbps(report):
    """(slowest node's active RDMA line rate in Gb/s, nodes without one), from every node's facts.

    The ring runs at the pace of its slowest node, so the floor comes from the minimum; a node
    with no active port gives no rate, and then the cluster has none either.
    """
    rates = {n["name"]: n.get("rdma_gbps") for n in report.get("nodes") or []}
    without = sorted(name for name, rate in rates.items() if not rate)
    if not rates or without:
        return None, without
    return float(min(rates.values())), []


def resolve_thresholds(report, overrides=None, rdma_gbps_per_node=None):
    """Defaults, the hardware table and the operator's overrides merged (overrides win).

    ``rdma_gbps_per_node`` None: the slowest node's own active ports (:func:`cluster_rdma_gbps`).
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    backend = report["backend"]
    out = {}
    model_key = report.get("gpu_model_key")
    without_rdma = []
    if rdma_gbps_per_node is None:
        rdma_gbps_per_node, without_rdma = cluster_rdma_gbps(report)
    floor, source = busbw_threshold(model_key, report["nproc_per_node"], report["nnodes"], backend, rdma_gbps_per_node)
    if floor is None and without_rdma and backend == "nccl" and report["nnodes"] > 1:
        source = "no active RDMA port on %s, so no fabric floor; set smoke_test_thresholds.min_busbw_gbps" % (
            ", ".join(without_rdma))
    out["min_busbw_gbps"] = {"value": floor, "source": source}
    if "min_busbw_gbps" in overrides:
        out["min_busbw_gbps"] = {"value": float(overrides["min_busbw_gbps"]), "source": "smoke_test_thresholds"}
    for key in ("min_loss_drop", "min_steps_per_s", "min_samples_per_s"):
        default = DEFAULT_THRESHOLDS[key]
        if isinstance(default, dict):
            default = default.get(backend)
        entry = {"value": default, "source": "default"}
        if key in overrides:
            entry = {"value": float(overrides[key]), "source": "smoke_test_thresholds"}
        out[key] = entry
    return out


BASELINE_REQUIRED_KEYS = ("schema", "hardware_key", "backend", "world_size", "metrics")
_JSON_TYPES = {"list": "array", "str": "string", "int": "number", "float": "number", "bool": "boolean",
               "NoneType": "null"}


def baseline_metrics(report):
    """The figures a baseline keeps (higher is better for all of them)."""
    sweep = report.get("sweep") or {}
    training = report.get("training") or {}
    return {
        "busbw_large_gbps": sweep.get("busbw_large_gbps"),
        "samples_per_s": training.get("samples_per_s"),
    }


def _positive_number(value):
    """True for a finite number > 0 (bool is not a number here)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def make_baseline(report):
    """A baseline document from a passing report; only figures a later run can be held to are kept."""
    sweep = report.get("sweep") or {}
    return {
        "schema": BASELINE_SCHEMA,
        "cluster": report["cluster"],
        "hardware_key": report["hardware_key"],
        "backend": report["backend"],
        "world_size": report["world_size"],
        "recorded_at": report.get("started_at"),
        "versions": report.get("versions"),
        # One rank has busbw 0 by definition: a zero is no reference, so it is left out.
        "metrics": {k: v for k, v in baseline_metrics(report).items() if _positive_number(v)},
        "sweep": [{"size_bytes": r["size_bytes"], "busbw_gbps": r["busbw_gbps"]} for r in sweep.get("rows") or []],
    }


def metric_problems(metrics, known=None):
    """Why ``metrics`` is no baseline's figures: [] for a non-empty object of finite numbers > 0 (named in
    ``known`` when that is given). Shared by the smoke baseline and the per-node baselines."""
    if not isinstance(metrics, dict) or not metrics:
        return ["metrics is %s, need an object with at least one %s" % (
            json.dumps(metrics, default=str),
            "of " + ", ".join(sorted(known)) if known is not None else "figure")]
    problems = []
    for name, value in sorted(metrics.items()):
        if known is not None and name not in known:
            problems.append("metric %s is unknown (known: %s)" % (name, ", ".join(sorted(known))))
        elif not _positive_number(value):
            problems.append("metric %s is %s, need a finite number > 0" % (name, json.dumps(value, default=str)))
    return problems


def document_problems(document, schema, required, expected):
    """Why a stored baseline document cannot be used: not a JSON object, a missing ``required`` key, another
    ``schema``, or a key of ``expected`` (hardware key, shape) that differs from this run's. Shared by the
    smoke baseline and the per-node baselines."""
    if not isinstance(document, dict):
        return ["it is a JSON %s, need an object" % _JSON_TYPES.get(type(document).__name__, type(document).__name__)]
    problems = []
    missing = [k for k in required if k not in document]
    if missing:
        problems.append("missing key(s) %s" % ", ".join(missing))
    if "schema" in document and document["schema"] != schema:
        problems.append("schema is %s, need %s" % (json.dumps(document["schema"], default=str), schema))
    for key, value in expected.items():
        if key in document and document[key] != value:
            problems.append("%s is %s, this run's is %s" % (
                key, json.dumps(document[key], default=str), json.dumps(value, default=str)))
    return problems


def _baseline_sweep_problems(sweep):
    if sweep is None:
        return []
    rows = sweep if isinstance(sweep, list) else [None]
    for row in rows:
        ok = (isinstance(row, dict) and _positive_number(row.get("size_bytes"))
              and (row.get("busbw_gbps") is None or row.get("busbw_gbps") == 0 or _positive_number(row.get("busbw_gbps"))))
        if not ok:
            return ["sweep row %s is not {size_bytes > 0, busbw_gbps >= 0}" % json.dumps(row, default=str)[:120]]
    return []


def baseline_problems(baseline, report):
    """Why ``baseline`` cannot be compared with ``report``: [] when it can.

    A baseline is a JSON object of schema BASELINE_SCHEMA with BASELINE_REQUIRED_KEYS, finite
    positive metrics, and the report's hardware key, backend and world size: anything else would
    compare this run with nothing, or with another cluster shape.
    """
    expected = {key: report.get(key) for key in ("hardware_key", "backend", "world_size")}
    problems = document_problems(baseline, BASELINE_SCHEMA, BASELINE_REQUIRED_KEYS, expected)
    if not isinstance(baseline, dict):
        return problems
    if "metrics" in baseline:
        problems.extend(metric_problems(baseline["metrics"], baseline_metrics({})))
    problems.extend(_baseline_sweep_problems(baseline.get("sweep")))
    return problems


def compare_baseline(report, baseline, tolerance=DEFAULT_TOLERANCE):
    """[{metric, current, baseline, change, regressed, message}] for every baseline metric this run measured.

    ``baseline`` must be usable (:func:`baseline_problems` empty). A current figure that is not a
    finite number >= 0 counts as regressed: a broken measurement is not "as good as before".
    """
    return compare_metrics(baseline_metrics(report), baseline["metrics"], tolerance)


def compare_metrics(current, base_metrics, tolerance=DEFAULT_TOLERANCE, missing_regresses=False):
    """Each base metric against this run's figure (higher is better). A figure that is not a finite
    number >= 0 regresses; a metric this run did not measure is skipped, or regresses with
    ``missing_regresses`` (a per-node baseline: the part it measured must still be there)."""
    out = []
    for metric, base in sorted(base_metrics.items()):
        now = current.get(metric)
        if now is None and not missing_regresses:
            continue
        if now is None or not (now == 0 or _positive_number(now)):
            out.append({"metric": metric, "current": now, "baseline": base, "change": None, "regressed": True,
                        "message": "%s regressed: this run measured %s, not a number >= 0, vs baseline %s" % (
                            metric, _fmt(now, 3) if now is not None else "nothing", _fmt(base, 3))})
            continue
        change = (now - base) / base
        regressed = now < base * (1.0 - tolerance)
        out.append({
            "metric": metric, "current": now, "baseline": base, "change": change, "regressed": regressed,
            "message": "%s %s %s vs baseline %s (%+.1f %%, tolerance %.0f %%)" % (
                metric, "regressed:" if regressed else "ok:", _fmt(now, 3), _fmt(base, 3), change * 100, tolerance * 100),
        })
    return out


def _check(name, status, message, value=None, threshold=None):
    return {"name": name, "status": status, "message": message, "value": value, "threshold": threshold}


def _check_baseline(report, baseline, tolerance, baseline_error=None):
    """(check, comparison, problems): the stored baseline judged, then compared with this run.

    A baseline that cannot be used (unreadable, wrong schema, metrics that are not finite positive
    numbers, another hardware key / backend / world size) fails the check with its reasons: it is
    never a pass by having nothing to compare.
    """
    if baseline is None and baseline_error is None:
        return _check("baseline", "skip", "no baseline stored for %s / %s" % (
            report["cluster"], report["hardware_key"])), [], []
    problems = [baseline_error] if baseline_error else baseline_problems(baseline, report)
    if problems:
        return _check("baseline", "fail", "the stored baseline cannot be used: %s; fix it, or remove it and "
                      "store a new one with smoke_test_store_baseline=true" % "; ".join(problems),
                      value=problems), [], problems
    if report.get("sweep") is None:
        return _check("baseline", "skip", "no job result to compare"), [], []
    comparison = compare_baseline(report, baseline, tolerance)
    regressed = [c for c in comparison if c["regressed"]]
    if regressed:
        return _check("baseline", "fail", "; ".join(c["message"] for c in regressed),
                      value={c["metric"]: c["current"] for c in regressed},
                      threshold={c["metric"]: c["baseline"] for c in regressed}), comparison, []
    if not comparison:
        return _check("baseline", "skip", "this run measured none of the baseline's metrics (%s)" % ", ".join(
            sorted(baseline["metrics"]))), comparison, []
    return _check("baseline", "pass", "; ".join(c["message"] for c in comparison)), comparison, []


def evaluate(report, thresholds, baseline=None, tolerance=DEFAULT_TOLERANCE, expect_rdma=False, sim=False,
             allow_socket_transport=False, allow_no_busbw_floor=False, baseline_error=None):
    """Add ``verdict`` ({passed, checks, reasons}) and ``baseline`` to the report; return the report.

    ``baseline``: the stored baseline as read (any JSON value), or None when there is none;
    ``baseline_error``: why the stored file could not be read at all (it then fails the check).

    A multi-node NCCL run that used TCP sockets between nodes, or that has no bandwidth floor to
    be held to, fails unless the operator opted out by name (``allow_socket_transport``,
    ``allow_no_busbw_floor``; the role's ``smoke_test_allow_*``). ``expect_rdma`` is kept for
    callers: sockets already fail without the opt-out.
    """
    checks = []
    expected = report["hosts_expected"]
    missing = report.get("missing_nodes") or []
    sweep = report.get("sweep")
    training = report.get("training")
    backend = report["backend"]

    if missing:
        checks.append(_check("nodes_joined", "fail", "; ".join("%s: %s" % (m["node"], m["reason"]) for m in missing),
                             value=[m["node"] for m in missing]))
    else:
        checks.append(_check("nodes_joined", "pass", "all %d node(s) joined: %s" % (len(expected), ", ".join(expected)),
                             value=report.get("nodes_joined")))
    bad = [n for n in report["nodes"] if n["status"] != "ok"]
    if bad or sweep is None:
        names = ", ".join("%s (%s%s)" % (n["name"], n["status"], ": " + n["error"] if n.get("error") else "") for n in bad)
        checks.append(_check("job_completed", "fail", names or "no node returned the job result"))
    else:
        launcher = (report.get("config") or {}).get("launcher") or "torchrun"
        checks.append(_check("job_completed", "pass", "%s finished on every node" % launcher))

    # A GPU node is one whose PCI bus or driver shows GPUs: with the driver not loaded nvidia-smi
    # sees none, but the bus still does, and a CPU run there proves nothing about the GPUs.
    gpu_nodes = [
        "%s (%s on PCI, %s seen by the driver, %s by torch)" % (
            n["name"], n.get("pci_gpu_count") or 0, n.get("gpu_count") or 0, n.get("torch_gpus") or 0)
        for n in report["nodes"]
        if (n.get("pci_gpu_count") or 0) > 0 or (n.get("gpu_status") == "ok" and (n.get("gpu_count") or 0) > 0)]
    if backend == "gloo" and gpu_nodes and not sim:
        checks.append(_check("backend", "fail", "GPU node(s) ran the job with gloo on the CPU: %s; fix the driver/torch "
                             "so the job runs NCCL on the GPUs" % "; ".join(gpu_nodes), value=backend))
    else:
        msg = "backend %s on %s" % (backend, report["device"])
        if gpu_nodes:
            msg += " (simulated GPUs, invisible to torch: %s)" % "; ".join(gpu_nodes)
        checks.append(_check("backend", "pass", msg, value=backend))

    if backend == "nccl":
        # Every GPU the driver sees must be a rank: a GPU torch cannot see is a GPU not tested.
        short = ["%s: torch sees %s of the driver's %s GPU(s)" % (n["name"], n.get("torch_gpus"), n.get("gpu_count"))
                 for n in report["nodes"] if n["status"] != "unreachable"
                 and (n.get("torch_gpus") is None or n.get("gpu_count") is None or n["torch_gpus"] != n["gpu_count"])]
        if short:
            checks.append(_check("gpus_used", "fail", "; ".join(short) + " (check CUDA_VISIBLE_DEVICES, the driver "
                                 "and the torch build)", value=len(short), threshold=0))
        else:
            checks.append(_check("gpus_used", "pass", "torch sees every GPU the driver sees on every node"))

    if sweep is None:
        for name in ("allreduce_correct", "busbw_gbps", "nccl_transport", "loss_decreased", "finite_values",
                     "params_in_sync", "steps_per_s", "samples_per_s"):
            checks.append(_check(name, "skip", "no job result"))
    else:
        rows = sweep.get("rows") or []
        invalid = ["%s B (%s)" % (r.get("size_bytes"), r["invalid"]) for r in rows if r.get("invalid")]
        if not rows:
            checks.append(_check("sweep_rows", "fail", "the all-reduce sweep returned no rows: nothing was measured",
                                 value=0, threshold=">= 1"))
        elif invalid:
            checks.append(_check("sweep_rows", "fail", "sweep rows without a usable time: %s" % ", ".join(invalid),
                                 value=len(invalid), threshold=0))
        else:
            checks.append(_check("sweep_rows", "pass", "%d sizes measured" % len(rows), value=len(rows)))
        wrong = sweep["wrong_total"]
        checks.append(_check("allreduce_correct", "pass" if wrong == 0 else "fail",
                             "%d wrong element(s) over %d sizes" % (wrong, len(sweep["rows"])), value=wrong, threshold=0))
        floor = thresholds["min_busbw_gbps"]["value"]
        got = sweep["busbw_large_gbps"]
        if floor is None and backend == "nccl" and report["nnodes"] > 1 and not allow_no_busbw_floor:
            checks.append(_check("busbw_gbps", "fail", "%s GB/s at large messages and no floor to judge it: %s "
                                 "(or set smoke_test_allow_no_busbw_floor: true to accept an unjudged run)"
                                 % (_fmt(got, 3), thresholds["min_busbw_gbps"]["source"]), value=got))
        elif floor is None:
            checks.append(_check("busbw_gbps", "skip", "%s GB/s at large messages; threshold %s%s"
                                 % (_fmt(got, 3), thresholds["min_busbw_gbps"]["source"],
                                    " (allowed by smoke_test_allow_no_busbw_floor)" if allow_no_busbw_floor
                                    and backend == "nccl" and report["nnodes"] > 1 else ""), value=got))
        else:
            checks.append(_check("busbw_gbps", "pass" if got is not None and got >= floor else "fail",
                                 "large-message busbw %s GB/s, floor %s GB/s (%s)" % (
                                     _fmt(got, 2), _fmt(floor, 1), thresholds["min_busbw_gbps"]["source"]),
                                 value=got, threshold=floor))
        nccl = report.get("nccl")
        if backend != "nccl":
            checks.append(_check("nccl_transport", "skip", "not applicable on gloo: transport is TCP by design"))
        elif report["nnodes"] < 2:
            checks.append(_check("nccl_transport", "pass", "one node: %s" % (", ".join(nccl["transports"]) or "no channel lines")))
        else:
            inter = nccl.get("inter_node")
            sockets = [n["name"] for n in report["nodes"] if n.get("inter_node") == "Socket"]
            if inter is None and not sockets:
                # Without NCCL's own word on the network path, a socket fallback cannot be ruled out.
                checks.append(_check("nccl_transport", "fail",
                                     "NCCL logged no inter-node transport for %s nodes; rerun with NCCL_DEBUG=INFO "
                                     "and NCCL_DEBUG_SUBSYS=INIT,NET (or raise the job's --max-nccl-lines)"
                                     % report["nnodes"], value=None))
            elif (inter == "Socket" or sockets) and not allow_socket_transport:
                checks.append(_check("nccl_transport", "fail",
                                     "NCCL used TCP sockets between nodes (%s%s)%s; fix the RDMA ports and "
                                     "/etc/nccl.conf, or set smoke_test_allow_socket_transport: true for a "
                                     "cluster without RDMA" % (
                                         inter, " on " + ", ".join(sockets) if sockets else "",
                                         ", where RDMA was expected" if expect_rdma else ""), value=inter))
            elif inter == "Socket" or sockets:
                checks.append(_check("nccl_transport", "pass", "inter-node transport Socket%s, allowed by "
                                     "smoke_test_allow_socket_transport" % (
                                         " on " + ", ".join(sockets) if sockets else ""), value=inter))
            else:
                checks.append(_check("nccl_transport", "pass", "inter-node transport %s%s" % (
                    inter, " with GPUDirect RDMA" if nccl.get("gdr") else ""), value=inter))
        t = training or {}
        drop = t.get("loss_drop")
        need = thresholds["min_loss_drop"]["value"]
        checks.append(_check("loss_decreased", "pass" if drop is not None and drop >= need else "fail",
                             "loss %s -> %s (drop %s, need >= %s)" % (_fmt(t.get("loss_first"), 4), _fmt(t.get("loss_last"), 4),
                                                                      _fmt(drop, 3), _fmt(need, 2)), value=drop, threshold=need))
        nonfinite = t.get("nonfinite_values")
        checks.append(_check("finite_values", "pass" if nonfinite == 0 else "fail",
                             "%s NaN/Inf value(s) in losses and parameters" % nonfinite, value=nonfinite, threshold=0))
        checks.append(_check("params_in_sync", "pass" if t.get("params_in_sync") else "fail",
                             "parameters identical on all %s ranks" % report["world_size"] if t.get("params_in_sync")
                             else "%s rank(s) differ from rank 0 (max diff %s)" % (t.get("ranks_out_of_sync"), t.get("max_param_diff")),
                             value=t.get("max_param_diff"), threshold=0))
        for key, metric in (("min_steps_per_s", "steps_per_s"), ("min_samples_per_s", "samples_per_s")):
            need = thresholds[key]["value"]
            got = t.get(metric)
            if need is None:
                checks.append(_check(metric, "skip", "%s %s; no threshold set" % (metric, _fmt(got, 1)), value=got))
            else:
                checks.append(_check(metric, "pass" if got is not None and got >= need else "fail",
                                     "%s %s, need >= %s" % (metric, _fmt(got, 1), _fmt(need, 1)), value=got, threshold=need))

    if report.get("nccl_tests"):
        problems = []
        for host, tests in sorted(report["nccl_tests"].items()):
            rc = (report.get("nccl_tests_rc") or {}).get(host)
            if rc not in (None, 0):
                problems.append("%s: all_reduce_perf exited with %s%s" % (
                    host, rc, " (timed out)" if rc in (124, 137) else ""))
            if not tests:
                problems.append("%s: all_reduce_perf printed no result table" % host)
            for test in tests:
                if not test.get("rows"):
                    problems.append("%s %s: no result rows" % (host, test.get("collective")))
                elif test.get("out_of_bounds_ok") is None and test.get("avg_busbw_gbps") is None:
                    problems.append("%s %s: the log stops before its summary; the run did not finish" % (
                        host, test.get("collective")))
                if test.get("wrong_total") or test.get("out_of_bounds_ok") is False:
                    problems.append("%s %s: %s wrong, out of bounds %s" % (host, test.get("collective"),
                                                                           test.get("wrong_total"), test.get("out_of_bounds")))
        checks.append(_check("nccl_tests", "fail" if problems else "pass",
                             "; ".join(problems) or "all_reduce_perf: no wrong values on %s" % ", ".join(sorted(report["nccl_tests"]))))

    baseline_check, comparison, problems = _check_baseline(report, baseline, tolerance, baseline_error)
    checks.append(baseline_check)

    checks.sort(key=lambda c: _CHECK_ORDER.index(c["name"]) if c["name"] in _CHECK_ORDER else 99)
    failed = [c for c in checks if c["status"] == "fail"]
    report["thresholds"] = thresholds
    found = baseline is not None or baseline_error is not None
    usable = found and not problems
    report["baseline"] = {"found": found, "usable": usable, "problems": problems, "tolerance": tolerance,
                          "comparison": comparison, "recorded_at": baseline.get("recorded_at") if usable else None,
                          "stored": False, "file": None}
    report["verdict"] = {"passed": not failed, "checks": checks,
                         "reasons": ["%s: %s" % (c["name"], c["message"]) for c in failed]}
    return report


# ------------------------------------------------------------------------------------------
# rendering


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
           '<text x="%d" y="20" font-size="13" text-anchor="middle">%s</text>' % (width // 2, escape(title))]
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
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (xx, top + ph + 16, escape(human_bytes(2 ** e))))
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
                       % (px(s), py(v), colour, escape(human_bytes(s)), _fmt(v, 3)))
        ly = top + 14 + i * 16
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            left + 10, ly - 4, left + 34, ly - 4, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        out.append('<text x="%d" y="%d">%s</text>' % (left + 40, ly, escape(label)))
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
    b = report.get("baseline") or {}
    if b.get("comparison"):
        lines += ["## Baseline", "", "| metric | this run | baseline | change |", "|---|---:|---:|---:|"]
        for c in b["comparison"]:
            change = "-" if c["change"] is None else "%+.1f %%" % (c["change"] * 100)
            lines.append("| %s | %s | %s | %s |" % (c["metric"], _fmt(c["current"], 3), _fmt(c["baseline"], 3), change))
        lines.append("")
    lines += ["## Nodes", "", "| node | address | procs | status | GPUs | inter-node | detail |", "|---|---|---:|---|---:|---|---|"]
    for n in report["nodes"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            n["name"], n.get("address") or "-", n.get("nproc") or "-", n["status"], _fmt(n.get("gpu_count")),
            n.get("inter_node") or "-", (n.get("error") or "").replace("|", "\\|")))
    lines.append("")
    for note in report.get("notes") or []:
        lines.append("> %s" % note)
    return "\n".join(lines) + "\n"
