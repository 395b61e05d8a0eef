# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Smoke test: the verdict (pure functions): thresholds, the stored baseline, and the checks.

``evaluate`` adds ``verdict`` ({passed, checks, reasons}) and ``baseline`` to a report that
smoke_report.build_report assembled; each check is one small function over the report, as
health.check_gpus judges a node. No Ansible import, no I/O.
"""

from __future__ import absolute_import, division, print_function

import json
import math

try:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import judge_figure, unit_of
    from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_parse import _fmt
except ImportError:  # pragma: no cover - loaded by path from tests/gpu without the collection
    from figures import judge_figure, unit_of  # type: ignore
    from smoke_parse import _fmt  # type: ignore

__metaclass__ = type

BASELINE_SCHEMA = "gpufleet.smoke.baseline/1"

# Single-node all-reduce busbw floors at large messages, GB/s (GB = 1e9 B), 8 GPUs per node.
# H100: Azure aznhc ND H100 v5 requires >= 460 at 16 GiB (the NVLink4 limit is 18 x 26.562 =
# ~478 GB/s per direction; 8x H100 measure ~480). H200: aznhc ND H200 v5 conf 431. A100 SXM:
# aznhc NDv4 230 (12 NVLink3 x 25 GB/s = 300). B200: AWS's NVLink-only all-reduce check for p6-b200
# (8x B200), 600 at 256 MiB (advisory there; 500 for p5 H100). Multi-node floors are derived (see
# busbw_threshold) because they depend on the fabric, not the GPU.
BUSBW_TABLE = [
    {"models": ["h100-sxm5-80gb", "h100", "h800"], "gpus_per_node": 8, "min_busbw_gbps": 460.0,
     "source": "Azure aznhc ND H100 v5 (>= 460 GB/s, NVLink4 limit ~478)"},
    {"models": ["h200"], "gpus_per_node": 8, "min_busbw_gbps": 431.0,
     "source": "Azure aznhc ND H200 v5 conf (431 GB/s)"},
    {"models": ["a100-sxm4-40gb", "a100-sxm4-80gb", "a100"], "gpus_per_node": 8, "min_busbw_gbps": 230.0,
     "source": "Azure aznhc NDv4 (230 GB/s, 12 NVLink3 x 25 GB/s)"},
    {"models": ["b200"], "gpus_per_node": 8, "min_busbw_gbps": 600.0,
     "source": "AWS aws-samples/awsome-distributed-training gpu-cluster-healthcheck checks/5-nccl-allreduce.sh "
               "(p6-b200 NVLink-only all-reduce >= 600 GB/s at 256 MiB)"},
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
_CHECK_ORDER = ["nodes_joined", "job_completed", "backend", "gpus_used", "sweep_rows", "allreduce_correct", "busbw_gbps",
                "nccl_transport", "loss_decreased", "finite_values", "params_in_sync", "steps_per_s",
                "samples_per_s", "nccl_tests", "baseline"]


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
        "metrics": {k: v for k, v in baseline_metrics(report).items() if judge_figure(v, k, unit_of(k))[1] is None},
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
        elif judge_figure(value, name, unit_of(name))[1]:
            # figures.judge_figure: also refuses a figure no part measures (1e-300 GB/s), a corrupted file
            why = judge_figure(value, name, unit_of(name))[1]
            problems.append("metric %s is %s, need a finite number > 0%s" % (
                name, json.dumps(value, default=str), " (%s)" % why if _positive_number(value) else ""))
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
        why = judge_figure(now, metric, unit_of(metric), zero_ok=True)[1]
        if why:  # figures.judge_figure: None, NaN, text, absurd figures are no match for the baseline
            out.append({"metric": metric, "current": now, "baseline": base, "change": None, "regressed": True,
                        "message": "%s regressed: this run measured %s, not a usable figure (%s), vs baseline %s" % (
                            metric, "nothing" if now is None else _fmt(now, 3) if isinstance(now, (int, float)) else json.dumps(now),
                            why, _fmt(base, 3))})
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


class _Judging(object):
    """What a check needs besides the report: the thresholds and the operator's opt-outs."""

    def __init__(self, thresholds, expect_rdma=False, sim=False, allow_socket_transport=False,
                 allow_no_busbw_floor=False):
        self.thresholds = thresholds
        self.expect_rdma = expect_rdma
        self.sim = sim
        self.allow_socket_transport = allow_socket_transport
        self.allow_no_busbw_floor = allow_no_busbw_floor


def _check_nodes_joined(report, judging):
    missing = report.get("missing_nodes") or []
    expected = report["hosts_expected"]
    if missing:
        return [_check("nodes_joined", "fail", "; ".join("%s: %s" % (m["node"], m["reason"]) for m in missing),
                       value=[m["node"] for m in missing])]
    return [_check("nodes_joined", "pass", "all %d node(s) joined: %s" % (len(expected), ", ".join(expected)),
                   value=report.get("nodes_joined"))]


def _check_job_completed(report, judging):
    bad = [n for n in report["nodes"] if n["status"] != "ok"]
    if bad or report.get("sweep") is None:
        names = ", ".join("%s (%s%s)" % (n["name"], n["status"], ": " + n["error"] if n.get("error") else "") for n in bad)
        return [_check("job_completed", "fail", names or "no node returned the job result")]
    launcher = (report.get("config") or {}).get("launcher") or "torchrun"
    return [_check("job_completed", "pass", "%s finished on every node" % launcher)]


def _check_backend(report, judging):
    backend = report["backend"]
    # A GPU node is one whose PCI bus or driver shows GPUs: with the driver not loaded nvidia-smi
    # sees none, but the bus still does, and a CPU run there proves nothing about the GPUs.
    gpu_nodes = [
        "%s (%s on PCI, %s seen by the driver, %s by torch)" % (
            n["name"], n.get("pci_gpu_count") or 0, n.get("gpu_count") or 0, n.get("torch_gpus") or 0)
        for n in report["nodes"]
        if (n.get("pci_gpu_count") or 0) > 0 or (n.get("gpu_status") == "ok" and (n.get("gpu_count") or 0) > 0)]
    if backend == "gloo" and gpu_nodes and not judging.sim:
        return [_check("backend", "fail", "GPU node(s) ran the job with gloo on the CPU: %s; fix the driver/torch "
                       "so the job runs NCCL on the GPUs" % "; ".join(gpu_nodes), value=backend)]
    msg = "backend %s on %s" % (backend, report["device"])
    if gpu_nodes:
        msg += " (simulated GPUs, invisible to torch: %s)" % "; ".join(gpu_nodes)
    return [_check("backend", "pass", msg, value=backend)]


def _check_gpus_used(report, judging):
    if report["backend"] != "nccl":
        return []
    # Every GPU the driver sees must be a rank: a GPU torch cannot see is a GPU not tested.
    short = ["%s: torch sees %s of the driver's %s GPU(s)" % (n["name"], n.get("torch_gpus"), n.get("gpu_count"))
             for n in report["nodes"] if n["status"] != "unreachable"
             and (n.get("torch_gpus") is None or n.get("gpu_count") is None or n["torch_gpus"] != n["gpu_count"])]
    if short:
        return [_check("gpus_used", "fail", "; ".join(short) + " (check CUDA_VISIBLE_DEVICES, the driver "
                       "and the torch build)", value=len(short), threshold=0)]
    return [_check("gpus_used", "pass", "torch sees every GPU the driver sees on every node")]


def _check_sweep(report, judging):
    """sweep_rows and allreduce_correct."""
    sweep = report["sweep"]
    rows = sweep.get("rows") or []
    invalid = ["%s B (%s)" % (r.get("size_bytes"), r["invalid"]) for r in rows if r.get("invalid")]
    if not rows:
        checks = [_check("sweep_rows", "fail", "the all-reduce sweep returned no rows: nothing was measured",
                         value=0, threshold=">= 1")]
    elif invalid:
        checks = [_check("sweep_rows", "fail", "sweep rows without a usable time: %s" % ", ".join(invalid),
                         value=len(invalid), threshold=0)]
    else:
        checks = [_check("sweep_rows", "pass", "%d sizes measured" % len(rows), value=len(rows))]
    wrong = sweep["wrong_total"]
    checks.append(_check("allreduce_correct", "pass" if wrong == 0 else "fail",
                         "%d wrong element(s) over %d sizes" % (wrong, len(sweep["rows"])), value=wrong, threshold=0))
    return checks


def _check_busbw(report, judging):
    backend, multi_node = report["backend"], report["nnodes"] > 1
    floor = judging.thresholds["min_busbw_gbps"]["value"]
    source = judging.thresholds["min_busbw_gbps"]["source"]
    got = report["sweep"]["busbw_large_gbps"]
    if floor is None and backend == "nccl" and multi_node and not judging.allow_no_busbw_floor:
        return [_check("busbw_gbps", "fail", "%s GB/s at large messages and no floor to judge it: %s "
                       "(or set smoke_test_allow_no_busbw_floor: true to accept an unjudged run)"
                       % (_fmt(got, 3), source), value=got)]
    if floor is None:
        return [_check("busbw_gbps", "skip", "%s GB/s at large messages; threshold %s%s"
                       % (_fmt(got, 3), source,
                          " (allowed by smoke_test_allow_no_busbw_floor)" if judging.allow_no_busbw_floor
                          and backend == "nccl" and multi_node else ""), value=got)]
    return [_check("busbw_gbps", "pass" if got is not None and got >= floor else "fail",
                   "large-message busbw %s GB/s, floor %s GB/s (%s)" % (_fmt(got, 2), _fmt(floor, 1), source),
                   value=got, threshold=floor)]


def _check_nccl_transport(report, judging):
    nccl = report.get("nccl")
    if report["backend"] != "nccl":
        return [_check("nccl_transport", "skip", "not applicable on gloo: transport is TCP by design")]
    if report["nnodes"] < 2:
        return [_check("nccl_transport", "pass", "one node: %s" % (", ".join(nccl["transports"]) or "no channel lines"))]
    inter = nccl.get("inter_node")
    sockets = [n["name"] for n in report["nodes"] if n.get("inter_node") == "Socket"]
    if inter is None and not sockets:
        # Without NCCL's own word on the network path, a socket fallback cannot be ruled out.
        return [_check("nccl_transport", "fail",
                       "NCCL logged no inter-node transport for %s nodes; rerun with NCCL_DEBUG=INFO "
                       "and NCCL_DEBUG_SUBSYS=INIT,NET (or raise the job's --max-nccl-lines)"
                       % report["nnodes"], value=None)]
    if (inter == "Socket" or sockets) and not judging.allow_socket_transport:
        return [_check("nccl_transport", "fail",
                       "NCCL used TCP sockets between nodes (%s%s)%s; fix the RDMA ports and "
                       "/etc/nccl.conf, or set smoke_test_allow_socket_transport: true for a "
                       "cluster without RDMA" % (
                           inter, " on " + ", ".join(sockets) if sockets else "",
                           ", where RDMA was expected" if judging.expect_rdma else ""), value=inter)]
    if inter == "Socket" or sockets:
        return [_check("nccl_transport", "pass", "inter-node transport Socket%s, allowed by "
                       "smoke_test_allow_socket_transport" % (" on " + ", ".join(sockets) if sockets else ""),
                       value=inter)]
    return [_check("nccl_transport", "pass", "inter-node transport %s%s" % (
        inter, " with GPUDirect RDMA" if nccl.get("gdr") else ""), value=inter)]


def _check_training(report, judging):
    """loss_decreased, finite_values, params_in_sync, steps_per_s and samples_per_s."""
    thresholds = judging.thresholds
    t = report.get("training") or {}
    drop = t.get("loss_drop")
    need = thresholds["min_loss_drop"]["value"]
    checks = [_check("loss_decreased", "pass" if drop is not None and drop >= need else "fail",
                     "loss %s -> %s (drop %s, need >= %s)" % (_fmt(t.get("loss_first"), 4), _fmt(t.get("loss_last"), 4),
                                                              _fmt(drop, 3), _fmt(need, 2)), value=drop, threshold=need)]
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
    return checks


_JOB_RESULT_CHECKS = (_check_sweep, _check_busbw, _check_nccl_transport, _check_training)
_NO_JOB_RESULT = ("allreduce_correct", "busbw_gbps", "nccl_transport", "loss_decreased", "finite_values",
                  "params_in_sync", "steps_per_s", "samples_per_s")


def _check_job_result(report, judging):
    """The checks of the job's own result; each is skipped, never passed, when no node returned one."""
    if report.get("sweep") is None:
        return [_check(name, "skip", "no job result") for name in _NO_JOB_RESULT]
    return [check for judge in _JOB_RESULT_CHECKS for check in judge(report, judging)]


def _nccl_tests_problems(host, tests, rc):
    problems = []
    if rc not in (None, 0):
        problems.append("%s: all_reduce_perf exited with %s%s" % (host, rc, " (timed out)" if rc in (124, 137) else ""))
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
    return problems


def _check_nccl_tests(report, judging):
    if not report.get("nccl_tests"):
        return []
    problems = []
    for host, tests in sorted(report["nccl_tests"].items()):
        problems += _nccl_tests_problems(host, tests, (report.get("nccl_tests_rc") or {}).get(host))
    return [_check("nccl_tests", "fail" if problems else "pass",
                   "; ".join(problems) or "all_reduce_perf: no wrong values on %s" % ", ".join(sorted(report["nccl_tests"])))]


# The verdict's checks, each a function of (report, judging) returning its checks; the baseline comes last.
CHECKS = (_check_nodes_joined, _check_job_completed, _check_backend, _check_gpus_used, _check_job_result,
          _check_nccl_tests)


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
    judging = _Judging(thresholds, expect_rdma, sim, allow_socket_transport, allow_no_busbw_floor)
    checks = [check for judge in CHECKS for check in judge(report, judging)]
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
