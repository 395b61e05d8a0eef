# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""nccl-tests runs judged with the smoke job's floors: pure functions (roles/gpu_benchmark).

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

A run is one nccl-tests binary on one node (``-g`` GPUs in one process), across every node (one rank per
GPU, through mpirun or srun), or across a pair of nodes. Its output is parsed with nccl_tests.py; the
figure judged is the busbw of the large messages (the smoke job's ``large_message_bytes``), not the
sweep average, which depends on where the sweep starts.

Floors, the smoke job's (smoke_verdict.busbw_threshold) so both steps hold the GPUs to the same numbers:

- all_reduce in one node: the single-node table (Azure aznhc: 8x H100 >= 460 GB/s, ...);
- all_reduce across nodes: 75 % of the slowest node's RDMA line rate, capped by the single-node floor;
- sendrecv between two nodes: each flow crosses one rail, so 75 % of the slowest port's rate (the same
  DCGM rule, per rail);
- the operator's ``min_busbw_gbps`` overrides any of them. No floor is no verdict: said, never a pass.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth import DEFAULT_FRACTION, name_culprits
from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth_plan import rdma_endpoint
from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import judge_figure
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import lookup_model
from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_tests import (
    large_message_band, normalize_collective, parse_nccl_tests)
from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_report import LARGE_MESSAGE_BYTES
from ansible_collections.gpufleet.cluster.plugins.module_utils.smoke_verdict import MULTI_NODE_EFFICIENCY, busbw_threshold


def nccl_run_summary(log, rc, collective, expected_ranks=None, large_bytes=LARGE_MESSAGE_BYTES):
    """``{collective, nranks, busbw_gbps, avg_busbw_gbps, rows, wrong_total, rc, problems}`` of one run.

    ``problems`` lists why the run cannot be trusted: a non-zero exit, no table for ``collective``, wrong
    elements, an out-of-bounds FAILED line, or fewer ranks than asked (a build without MPI runs each
    process alone). ``busbw_gbps`` is the peak busbw over the sizes >= ``large_bytes``.
    """
    name = normalize_collective(collective)
    parsed = [t for t in parse_nccl_tests(log or "") if t.get("collective") in (name, None)]
    tests = [t for t in parsed if t.get("rows")]
    test = tests[-1] if tests else None
    problems = []
    if rc not in (0, None):
        problems.append("exit status %s" % rc)
    # A test that failed (before its table or after some rows) says why in nccl-tests' own words.
    problems += ["%s: %s" % (f.get("where") or f.get("host") or "nccl-tests", f.get("message"))
                 for t in parsed for f in t.get("failures") or []]
    if test is None:
        problems.append("no %s table in the output" % name)
        return {"collective": name, "nranks": None, "busbw_gbps": None, "avg_busbw_gbps": None, "rows": [],
                "wrong_total": None, "rc": rc, "problems": problems}
    if test.get("wrong_total"):
        problems.append("%d wrong element(s)" % test["wrong_total"])
    if test.get("out_of_bounds_ok") is False:
        problems.append("out-of-bounds values FAILED")
    if expected_ranks and test.get("nranks") not in (None, expected_ranks):
        problems.append("%s rank(s) ran, %d expected (is nccl-tests built with MPI=1?)" % (test["nranks"], expected_ranks))
    rows = [{"size_bytes": r["size_bytes"],
             "busbw_gbps": max([h["busbw_gbps"] for h in (r["out_of_place"], r["in_place"])
                                if h.get("busbw_gbps") is not None] or [None])} for r in test["rows"]]
    # No large-message figure (a sweep that stopped short), or one that is no figure, is a run that cannot be
    # trusted: never a pass for want of a number to compare.
    band = large_message_band(test, min_size_bytes=large_bytes)
    busbw, problem = judge_figure(band["busbw_gbps"] if band else None,
                                  "busbw at messages >= %d B" % large_bytes, "GB/s", zero_ok=True)
    problems += [problem] if problem else []
    return {"collective": name, "nranks": test.get("nranks"), "rc": rc, "problems": problems,
            "busbw_gbps": busbw, "collapse": (band or {}).get("collapse"),
            "avg_busbw_gbps": test.get("avg_busbw_gbps"), "rows": rows, "wrong_total": test.get("wrong_total")}


def nccl_floor(collective, model_key, gpus_per_node, nnodes, rdma_gbps_per_node=None, rail_gbps=None,
               override=None):
    """(floor in GB/s or None, where it comes from)."""
    if override not in (None, ""):
        try:
            number = float(override)  # an operator's "300" from the command line is meant as 300
        except (TypeError, ValueError):
            number = override
        floor, problem = judge_figure(number, "the gpu_benchmark_thresholds floor %r" % (override,), "GB/s")
        return (floor, "gpu_benchmark_thresholds") if problem is None else (None, problem + "; set a floor in GB/s")
    name = normalize_collective(collective)
    if name == "all_reduce":
        floor, source = busbw_threshold(model_key, int(gpus_per_node), int(nnodes), "nccl", rdma_gbps_per_node)
        # The smoke job's wording names its own knob; this step's is gpu_benchmark_thresholds.
        key = "single_min_busbw_gbps" if int(nnodes) == 1 else "multi_min_busbw_gbps"
        return floor, source.replace("smoke_test_thresholds.min_busbw_gbps", "gpu_benchmark_thresholds." + key)
    if name == "sendrecv" and int(nnodes) == 2:
        if not rail_gbps:
            return None, "no RDMA port rate on the pair, so no per-rail floor; set gpu_benchmark_thresholds"
        line = float(rail_gbps) / 8.0
        return (MULTI_NODE_EFFICIENCY * line,
                "%.0f %% of the slower pair's port rate %.0f Gb/s (= %.1f GB/s): each sendrecv flow crosses one rail"
                % (MULTI_NODE_EFFICIENCY * 100, rail_gbps, line))
    return None, "no reference for %s on %s node(s); set gpu_benchmark_thresholds" % (name, nnodes)


def judge_run(kind, summary, floor, source, nodes, binary):
    """Findings for one run, put on every node it ran on: NCCL_TESTS_FAILED, NCCL_TESTS_BUSBW_LOW."""
    findings = []
    label = "%s %s on %s" % (kind, binary, ", ".join(nodes))
    if summary["problems"]:
        for node in nodes:
            findings.append(make_finding(
                "NCCL_TESTS_FAILED", "fail", node, "%s: %s" % (label, "; ".join(summary["problems"])),
                "Read the run's output in nccl_tests.json; rerun %s by hand with NCCL_DEBUG=INFO" % binary,
                value=summary["busbw_gbps"], run=kind))
        return findings
    if floor is not None and summary["busbw_gbps"] is not None and summary["busbw_gbps"] < floor:
        for node in nodes:
            findings.append(make_finding(
                "NCCL_TESTS_BUSBW_LOW", "fail", node,
                "%s: busbw %.2f GB/s at large messages is below %.2f GB/s (%s)%s" % (
                    label, summary["busbw_gbps"], floor, source,
                    "; " + summary["collapse"]["text"] if summary.get("collapse") else ""),
                "Check NVLink (nvidia-smi nvlink -s) inside a node, the HCAs and GPUDirect RDMA across nodes, "
                "and the bandwidth pair tests (bandwidth.json)",
                value=round(summary["busbw_gbps"], 3), threshold=round(floor, 3), run=kind))
    return findings


def run_record(kind, nodes, binary, summary, floor, source, tail=""):
    """What the report keeps of one run."""
    return {"run": kind, "nodes": list(nodes), "binary": binary, "busbw_gbps": summary["busbw_gbps"],
            "avg_busbw_gbps": summary["avg_busbw_gbps"], "nranks": summary["nranks"],
            "floor_gbps": floor, "floor_source": source, "problems": summary["problems"],
            "rows": summary["rows"], "tail": tail}


def pair_entries(record):
    """A pairwise run as the bandwidth verdict's link figures (both directions, Gb/s = 8 x GB/s)."""
    a, b = record["nodes"]
    gbps = None if (record["problems"] or record["busbw_gbps"] is None) else record["busbw_gbps"] * 8.0
    floor = record["floor_gbps"] * 8.0 if record.get("floor_gbps") else None
    base = {"gbps": gbps, "rate_floor_gbps": floor, "network": "nccl", "tool": record["binary"], "rails": []}
    return [dict(base, src=a, dst=b), dict(base, src=b, dst=a)]


def launcher_argv(launcher, prefix, hosts, binary, args):
    """The command that runs ``binary`` with one rank per GPU on ``hosts`` ([(host, gpus)]).

    ``mpirun``: ``PREFIX -np N -H h1:g1,h2:g2 BINARY ARGS -g 1`` (Open MPI's host:slots form);
    ``srun``: ``PREFIX --nodes K --ntasks-per-node G --nodelist h1,h2 BINARY ARGS -g 1`` (every node the
    same G, as srun's per-node count requires). Raises ValueError on an unknown launcher or uneven GPUs
    under srun.
    """
    hosts = [(str(h), int(g)) for h, g in hosts]
    total = sum(g for _h, g in hosts)
    tail = [binary] + [str(a) for a in args] + ["-g", "1"]
    if launcher == "mpirun":
        return [str(p) for p in prefix] + ["-np", str(total), "-H", ",".join("%s:%d" % hg for hg in hosts)] + tail
    if launcher == "srun":
        counts = {g for _h, g in hosts}
        if len(counts) != 1:
            raise ValueError("srun runs the same number of tasks on every node; GPUs per node differ: %s"
                             % ", ".join("%s:%d" % hg for hg in hosts))
        return [str(p) for p in prefix] + ["--nodes", str(len(hosts)), "--ntasks-per-node", str(counts.pop()),
                                           "--nodelist", ",".join(h for h, _g in hosts)] + tail
    raise ValueError("unknown launcher %r; known: mpirun, srun" % (launcher,))


def undirected(links, exclude=None):
    """One {src, dst} per unordered pair of ``links``, in first-seen order (an NCCL run is symmetric),
    leaving out the pairs of ``exclude`` (already run)."""
    seen = {frozenset((link["src"], link["dst"])) for link in exclude or []}
    out = []
    for link in links or []:
        key = frozenset((link["src"], link["dst"]))
        if key not in seen and len(key) == 2:
            seen.add(key)
            out.append({"src": link["src"], "dst": link["dst"]})
    return out


def node_facts(gpu_info, rdma_info):
    """What the nccl-tests floors need of one node: GPU count and model, fabric rate (sum and per rail)."""
    gpu_info = gpu_info or {}
    names = [g.get("name") for g in gpu_info.get("gpus") or [] if g.get("name")]
    model = lookup_model(names[0]) if names else None
    devices = rdma_endpoint((rdma_info or {}).get("cas") or [], {})["devices"]
    rates = [d["rate_gbps"] for d in devices if d.get("rate_gbps")]
    count = gpu_info.get("driver_gpu_count") if gpu_info.get("status") == "ok" else 0
    return {"gpus": int(count or 0), "gpu_name": names[0] if names else None,
            "model_key": model["key"] if model else None,
            "rdma_gbps": float(sum(rates)) if rates else None, "rail_gbps": float(min(rates)) if rates else None}


def judge_nccl(nodes, facts, runs, thresholds=None, large_bytes=LARGE_MESSAGE_BYTES):
    """Judge every nccl-tests run of the step: ``{runs, findings, not_checked}``.

    ``facts`` maps node -> node_facts(); ``runs`` is ``{"single": {node: {log, rc, binary} or {reason}},
    "multi": {log, rc, binary, nodes} or {reason}, "pairs": [{log, rc, binary, nodes}]}``. ``thresholds``
    may set ``single_min_busbw_gbps``, ``multi_min_busbw_gbps``, ``pair_min_busbw_gbps`` (GB/s).
    """
    thresholds = thresholds or {}
    findings, not_checked, records = [], [], {"single": [], "multi": None, "pairs": []}
    for node in nodes:
        run = (runs.get("single") or {}).get(node) or {}
        if "log" not in run:
            not_checked.append({"check": "nccl-tests within the node", "node": node,
                                "reason": run.get("reason") or "not run"})
            continue
        gpus = facts[node]["gpus"]
        summary = nccl_run_summary(run["log"], run.get("rc"), "all_reduce", gpus, large_bytes)
        floor, source = nccl_floor("all_reduce", facts[node]["model_key"], gpus, 1,
                                   override=thresholds.get("single_min_busbw_gbps"))
        records["single"].append(run_record("single", [node], run.get("binary"), summary, floor, source,
                                            run.get("tail", "")))
        findings += judge_run("single-node", summary, floor, source, [node], run.get("binary"))
        if floor is None:
            not_checked.append({"check": "nccl-tests busbw within the node", "node": node, "reason": source})
    multi = runs.get("multi") or {}
    if "log" in multi:
        members = multi["nodes"]
        slowest = [facts[n]["rdma_gbps"] for n in members]
        rdma = None if any(r is None for r in slowest) else min(slowest)
        gpus = min(facts[n]["gpus"] for n in members)
        summary = nccl_run_summary(multi["log"], multi.get("rc"), "all_reduce", sum(facts[n]["gpus"] for n in members),
                                   large_bytes)
        floor, source = nccl_floor("all_reduce", facts[members[0]]["model_key"], gpus, len(members), rdma,
                                   override=thresholds.get("multi_min_busbw_gbps"))
        records["multi"] = run_record("multi-node", members, multi.get("binary"), summary, floor, source,
                                      multi.get("tail", ""))
        findings += judge_run("multi-node", summary, floor, source, members, multi.get("binary"))
        if floor is None:
            not_checked.append({"check": "nccl-tests busbw across nodes", "reason": source})
    else:
        not_checked.append({"check": "nccl-tests across nodes", "reason": multi.get("reason") or "not run"})
    records["pairs"] = [pair_record(pair, facts, thresholds, large_bytes) for pair in runs.get("pairs") or []]
    return {"runs": records, "findings": findings, "not_checked": not_checked}


def pair_record(pair, facts, thresholds=None, large_bytes=LARGE_MESSAGE_BYTES):
    """One pairwise run ({log, rc, binary, nodes, collective, round}) as a report record with its floor."""
    members = pair["nodes"]
    collective = pair.get("collective") or "sendrecv"
    rails = [facts[n]["rail_gbps"] for n in members]
    summary = nccl_run_summary(pair.get("log"), pair.get("rc"), collective,
                               sum(facts[n]["gpus"] for n in members), large_bytes)
    floor, source = nccl_floor(collective, facts[members[0]]["model_key"], facts[members[0]]["gpus"], 2,
                               rail_gbps=None if None in rails else min(rails),
                               override=(thresholds or {}).get("pair_min_busbw_gbps"))
    record = run_record("pair", members, pair.get("binary"), summary, floor, source, pair.get("tail", ""))
    record["round"] = pair.get("round")
    return record


def _summary_line(record):
    figure = "%.2f GB/s" % record["busbw_gbps"] if record["busbw_gbps"] is not None else "no figure"
    floor = ", floor %.2f" % record["floor_gbps"] if record.get("floor_gbps") is not None else ", no floor"
    problems = " (%s)" % "; ".join(record["problems"]) if record["problems"] else ""
    return "%s %s on %s: %s%s%s" % (record["run"], record["binary"], "+".join(record["nodes"]), figure, floor, problems)


def pair_figures(pair_runs, facts, thresholds=None, large_bytes=LARGE_MESSAGE_BYTES):
    """Pairwise runs as the bandwidth verdict's link figures (Gb/s), each judged against its own floor."""
    return [e for pair in pair_runs or [] for e in pair_entries(pair_record(pair, facts, thresholds, large_bytes))]


def nccl_verdict(nodes, facts, runs, thresholds=None, fraction=DEFAULT_FRACTION, large_bytes=LARGE_MESSAGE_BYTES):
    """judge_nccl, plus the pairwise search: the ring of pairs and the suspect/reference pairs named with
    the bandwidth verdict (BANDWIDTH_NODE_SLOW / BANDWIDTH_LINK_SLOW, network ``nccl``), each node's
    single-node busbw as its intra-node figure."""
    result = judge_nccl(nodes, facts, runs, thresholds, large_bytes)
    result["summary"] = [_summary_line(r) for r in result["runs"]["single"] + [result["runs"]["multi"]]
                         + result["runs"]["pairs"] if r]
    pairs = runs.get("pairs") or []
    if not pairs:
        result["pair_verdict"] = None
        return result
    ring = pair_figures([p for p in pairs if p.get("round") == "ring"], facts, thresholds, large_bytes)
    rest = pair_figures([p for p in pairs if p.get("round") != "ring"], facts, thresholds, large_bytes)
    per_node = {r["nodes"][0]: {"gbps": r["busbw_gbps"] * 8.0 if r["busbw_gbps"] is not None else None,
                                "network": "nccl", "tool": r["binary"]}
                for r in result["runs"]["single"] if not r["problems"]}
    tool = pairs[0].get("binary") or "sendrecv_perf"
    findings, verdict = name_culprits(list(nodes), ring, per_node, rest, fraction, None, "nccl, %s" % tool)
    result["findings"] += findings
    result["pair_verdict"] = verdict
    return result
