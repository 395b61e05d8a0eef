# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Smoke-test report: assemble what the nodes returned into one report (pure functions).

Input is what the smoke_test role collects: per node the plan (address, processes, GPU facts,
what torch sees) and the JSON the job launcher printed (roll call, torchrun exit, NCCL INFO
lines, and on one node the job result). Output is one report dict; smoke_verdict.evaluate judges
it and smoke_render renders it (JSON through report_writer.render_json). No Ansible import, no I/O:
the action plugin and tests/gpu/ do the reading and writing.
"""

from __future__ import absolute_import, division, print_function

try:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_tests import band_busbw, bus_factor, parse_nccl_tests
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import lookup_model
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_peaks import peak_tflops
    from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_parse import _addresses_in, diagnose_rollcall, parse_nccl_debug, slug
except ImportError:  # pragma: no cover - loaded by path from tests/gpu without the collection
    from nccl_tests import band_busbw, bus_factor, parse_nccl_tests  # type: ignore
    from gpu_models import lookup_model  # type: ignore
    from gpu_peaks import peak_tflops  # type: ignore
    from smoke_parse import _addresses_in, diagnose_rollcall, parse_nccl_debug, slug  # type: ignore

__metaclass__ = type

REPORT_SCHEMA = "gpufleet.smoke/1"
LARGE_MESSAGE_BYTES = 256 * 1024 * 1024


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


def _job_result(expected, outputs):
    """(the job's result, the node that printed it): the first node in inventory order that has one."""
    for host in expected:
        out = outputs.get(host) or {}
        if out.get("result"):
            return out["result"], host
    return None, None


def _empty_row(host, info):
    return {"name": host, "address": (info or {}).get("address"), "nproc": (info or {}).get("nproc"),
            "status": "ok", "rc": None, "timed_out": False, "error": None, "last_stages": {},
            "gpu_model": None, "gpu_count": None, "driver_version": None, "cuda_version": None,
            "torch": None, "inter_node": None, "transports": [], "log_tail": [],
            "pci_gpu_count": None, "torch_gpus": None, "rdma_gbps": None, "rollcall_s": None}


def _add_node_facts(row, info):
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


def _add_launcher_output(row, out):
    """The launcher's word on the node: roll call, exit, stages, and the NCCL transports it logged."""
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
    parsed = parse_nccl_debug(out.get("nccl_lines") or [])
    row["inter_node"] = parsed["inter_node"]
    row["transports"] = parsed["transports"]


def _node_rows(expected, nodes, outputs):
    """(one row per expected node, every node's NCCL lines, roll-call views, views after a failed job)."""
    rows, nccl_lines, views, views_after = [], [], {}, {}
    for host in expected:
        info = nodes.get(host)
        out = outputs.get(host)
        row = _empty_row(host, info)
        if info:
            _add_node_facts(row, info)
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
            _add_launcher_output(row, out)
            nccl_lines.extend(out.get("nccl_lines") or [])
        rows.append(row)
    return rows, nccl_lines, views, views_after


def _named_by_their_failure(node_rows):
    """Roll call passed but the job failed: nodes named by their own failure, then by the peer
    addresses their errors mention."""
    missing = []
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
    return missing


def _missing_nodes(expected, result, node_rows, views, views_after):
    """[{node, reason}]: the nodes the job ran without, or those a failed job points at."""
    if result:
        joined = list(result["nodes"])
        errors = {r["name"]: r["error"] for r in node_rows if r["status"] != "ok" and r["error"]}
        return [{"node": host, "reason": "%snot among the nodes in the job (joined: %s)" % (
            errors[host] + "; " if host in errors else "", ", ".join(joined))} for host in expected if host not in joined]
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
    return missing or _named_by_their_failure(node_rows)


def _versions(node_rows, result, nccl):
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
    if nccl and nccl.get("version"):
        versions["nccl"] = nccl["version"]
        if nccl.get("cuda") and not versions["cuda"]:
            versions["cuda"] = nccl["cuda"]
    return versions


def _sweep(result, world, config):
    """The job's all-reduce sweep with algbw and busbw recomputed from size and time."""
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
    return sweep


def _nccl_tests(nccl_tests_logs):
    """({host: parsed nccl-tests}, {host: exit status}) from {host: log text} or {host: {"text", "rc"}}."""
    nt, nt_rc = {}, {}
    for host, log in (nccl_tests_logs or {}).items():
        text, rc = (log.get("text") or "", log.get("rc")) if isinstance(log, dict) else (log, None)
        if text or rc not in (None, ""):
            nt[host] = parse_nccl_tests(text) if text else []
            nt_rc[host] = None if rc in (None, "") else int(rc)
    return nt, nt_rc


def build_report(cluster, expected, nodes, outputs, backend, hparams=None, config=None, nccl_tests_logs=None,
                 started_at=None, notes=None):
    """Assemble the report (no verdict yet).

    expected: host names in inventory order (the play's hosts, also those Ansible could not reach).
    nodes: {host: {address, nproc, gpu (gpu_info result), probe (job probe), rdma_gbps}} for hosts
    that got as far as the launch. outputs: {host: launcher JSON dict or None}.
    """
    config = dict(config or {})
    present = [h for h in expected if h in nodes]
    result, result_node = _job_result(expected, outputs)
    gpu_name, model_key = _gpu_model([nodes[h] for h in present])
    nprocs = [int(nodes[h].get("nproc") or 0) for h in present]
    world = result["world_size"] if result else sum(nprocs)
    gpus_per_node = max(nprocs) if nprocs else 0
    node_rows, nccl_lines, views, views_after = _node_rows(expected, nodes, outputs)
    nccl = parse_nccl_debug(nccl_lines) if backend == "nccl" else None
    sweep = _sweep(result, world, config) if result else None
    training = result.get("training") if result else None
    if training:
        training = dict(training, mfu=model_flops_utilization(training, gpu_name, backend, world))
    nt, nt_rc = _nccl_tests(nccl_tests_logs)
    return {
        "schema": REPORT_SCHEMA,
        "cluster": cluster,
        "started_at": started_at,
        "hosts_expected": list(expected),
        "nodes_joined": list(result["nodes"]) if result else [],
        "missing_nodes": _missing_nodes(expected, result, node_rows, views, views_after),
        "nnodes": len(expected),
        "world_size": world,
        "nproc_per_node": gpus_per_node,
        "backend": backend,
        "device": "gpu" if backend == "nccl" else "cpu",
        "gpu_model": gpu_name,
        "gpu_model_key": model_key if backend == "nccl" else None,
        "hardware_key": hardware_key(model_key if backend == "nccl" else "cpu", gpus_per_node, len(expected), backend),
        "rank0_node": result_node,
        "versions": _versions(node_rows, result, nccl),
        "hparams": hparams,
        "sweep": sweep,
        "training": training,
        "nccl": nccl,
        "transports": nccl["transports"] if nccl else ["gloo/TCP"],
        "nccl_tests": nt,
        "nccl_tests_rc": nt_rc,
        "nodes": node_rows,
        "notes": list(notes or []),
        "config": config,
    }


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
    """The sweep's large-message busbw, judged as nccl-tests' is (nccl_tests.band_busbw over the sizes >=
    large_bytes, the largest size when none is that large): its lowest figure once it peaked, so a
    collapse at the largest sizes is not hidden behind the peak."""
    band = band_busbw([r for r in rows or [] if r.get("busbw_gbps") is not None], min_size_bytes=large_bytes)
    return band["busbw_gbps"] if band else None
