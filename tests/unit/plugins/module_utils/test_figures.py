"""One figure-or-not-checked rule (figures.py) and every verdict that judges a measured figure (issue 35).

Each verdict is fed the inputs a broken run, a broken file or a broken template hands it: NaN, Infinity,
-1, 0, None, the string "12", 1e-300, a GPU that printed no line, a 10,000-deep JSON. None of them may
pass, and none may crash the verdict: each is a fail finding or an explicit "not checked" with a reason.
"""

import json

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import (
    bandwidth, figures, gpu_compute, homogeneity, node_baseline as nb, smoke_verdict)
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding

BAD = [float("nan"), float("inf"), float("-inf"), -1, 0, None, "12", True, 1e-300, 1e300, [3.0]]
BAD_IDS = ["nan", "inf", "-inf", "-1", "0", "None", "str12", "bool", "1e-300", "1e300", "list"]


# --- the helper -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD, ids=BAD_IDS)
def test_judge_figure_refuses_what_is_no_figure_and_says_why(value):
    figure, why = figures.judge_figure(value, "GPU 3 bf16 GEMM", "TFLOPS")
    assert figure is None and why.startswith("GPU 3 bf16 GEMM (TFLOPS)")
    assert json.dumps(why)  # a reason always serialises


@pytest.mark.parametrize("value, unit", [(794.5, "TFLOPS"), (2540, "GB/s"), (0.009, "Gb/s"), (0.03, "TFLOPS")])
def test_judge_figure_keeps_real_figures_as_floats(value, unit):
    figure, why = figures.judge_figure(value, "x", unit)
    assert why is None and figure == float(value) and isinstance(figure, float)


def test_a_measured_zero_is_a_figure_only_where_the_caller_says_so():
    assert figures.judge_figure(0, "link", "Gb/s", zero_ok=True) == (0.0, None)
    assert figures.judge_figure(0, "link", "Gb/s")[0] is None
    assert figures.judge_figure(float("nan"), "link", "Gb/s", zero_ok=True)[0] is None


def test_missing_members_and_the_findings():
    assert figures.missing(range(8), [0, 1, 2, 4, 5, 6, 7]) == [3]
    invalid = figures.figure_finding("node1", "GPU 3 copy is NaN", "rerun", value=float("nan"))
    absent = figures.missing_finding("node1", "GPU 7 printed no figure", "check GPU 7")
    for finding in (invalid, absent):
        assert validate_finding(finding) == [] and finding["severity"] == "fail"
        json.dumps(finding, allow_nan=False)
    assert (invalid["code"], absent["code"]) == ("FIGURE_INVALID", "FIGURE_MISSING")


# --- N6: the GEMM/memory verdict ------------------------------------------------------------------

def _line(index, bf16=794.5, copy=2540.0):
    return json.dumps({"device": "cuda", "index": index, "name": "NVIDIA H100 80GB HBM3",
                       "gemm_tflops": {"bf16": bf16}, "gemm_skipped": {}, "copy_gbps": copy})


def _run(lines):
    return {"stdout": "\n".join(lines), "rc": 0, "stderr": ""}


@pytest.mark.parametrize("value", BAD, ids=BAD_IDS)
def test_compute_verdict_fails_a_gpu_whose_figure_is_no_figure(value):
    lines = [_line(i) for i in range(8)]
    # json writes NaN/Infinity and reads them back: exactly what a broken benchmark prints.
    lines[3] = _line(3, bf16=value)
    lines[5] = _line(5, copy=value)
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run(lines)}, expected_gpus={"node1": 8})
    bad = sorted((f["code"], f["gpu_index"], f["metric"]) for f in result["findings"])
    if value == 0:  # a measured zero is a figure, and far below every floor
        assert bad == [("GPU_GEMM_SLOW", 3, "bf16"), ("GPU_MEMORY_SLOW", 5, "memory")]
    else:
        assert bad == [("FIGURE_INVALID", 3, "bf16"), ("FIGURE_INVALID", 5, "memory")]
    json.dumps(result, allow_nan=False)  # the report stays JSON
    assert all(validate_finding(f) == [] for f in result["findings"])


def test_compute_verdict_fails_the_gpu_that_printed_no_line():
    lines = [_line(i) for i in range(8) if i != 7]  # 7 of 8
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run(lines)}, expected_gpus={"node1": 8})
    assert [(f["code"], f["gpu_index"]) for f in result["findings"]] == [("FIGURE_MISSING", 7)]
    assert "GPU 7" in result["findings"][0]["message"] and "8 expected" in result["findings"][0]["message"]


def test_compute_verdict_sees_a_gap_in_the_indexes_without_an_expected_count():
    lines = [_line(i) for i in range(8) if i != 3]
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run(lines)})
    assert [(f["code"], f["gpu_index"]) for f in result["findings"]] == [("FIGURE_MISSING", 3)]
    # With no expected count, the last GPU's absence cannot be seen: said, not passed.
    assert any(n["check"] == "GPU count" and n["node"] == "node1" for n in result["not_checked"])


def test_compute_verdict_with_every_gpu_reporting_passes():
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run([_line(i) for i in range(8)])},
                                         expected_gpus={"node1": 8})
    assert result["findings"] == [] and result["not_checked"] == []


@pytest.mark.parametrize("runs", [None, "12", {"node1": None}, {"node1": "text"}, {"node1": {"stdout": None}}])
def test_the_compute_filter_refuses_or_reports_what_is_no_run(runs):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_benchmark as flt
    try:
        result = flt.gpu_benchmark_compute_verdict(["node1"], runs)
    except AnsibleFilterError as exc:
        assert "gpu_benchmark_compute_verdict" in str(exc)
        return
    assert result["findings"] or result["not_checked"]


@pytest.mark.parametrize("fraction", [None, "x", float("nan"), float("inf"), 0, -1, 2])
def test_the_compute_filter_refuses_a_fraction_that_is_no_fraction(fraction):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_benchmark as flt
    with pytest.raises(AnsibleFilterError, match="gpu_benchmark_min_peak_fraction"):
        flt.gpu_benchmark_compute_verdict(["node1"], {}, fraction)


# --- N16: the node baselines and the smoke baseline -----------------------------------------------

def _current():
    return {"node1": {"hardware_key": "h100-sxm5-80gb-x8", "metrics": {"gpu0.copy_gbps": 2540.0}}}


def test_a_10000_deep_baseline_is_unusable_not_a_crash():
    deep = "[" * 10000 + "]" * 10000
    verdict = nb.node_verdict("compute", "c", _current(), {"node1": deep})
    (finding,) = verdict["findings"]
    assert finding["code"] == "NODE_BASELINE_UNUSABLE" and "nested" in finding["message"]


@pytest.mark.parametrize("value", [1e-300, 1e300, "12", True], ids=["1e-300", "1e300", "str12", "bool"])
def test_an_absurd_baseline_figure_is_unusable(value):
    document = nb.make_node_baseline("c", "node1", "compute", _current()["node1"])
    document["metrics"]["gpu0.copy_gbps"] = value
    verdict = nb.node_verdict("compute", "c", _current(), {"node1": json.dumps(document)})
    (finding,) = verdict["findings"]
    assert finding["code"] == "NODE_BASELINE_UNUSABLE" and "gpu0.copy_gbps" in finding["message"]


def test_an_absurd_figure_is_never_stored_as_a_baseline():
    current = {"node1": {"hardware_key": "k", "metrics": {"gpu0.copy_gbps": 1e-300, "gpu1.copy_gbps": 2540.0}}}
    assert nb.make_node_baseline("c", "node1", "compute", current["node1"])["metrics"] == {"gpu1.copy_gbps": 2540.0}


@pytest.mark.parametrize("now", [float("nan"), float("inf"), -1, "12", 1e-300], ids=["nan", "inf", "-1", "str12", "1e-300"])
def test_a_broken_current_figure_regresses_against_the_baseline(now):
    (row,) = smoke_verdict.compare_metrics({"busbw_large_gbps": now}, {"busbw_large_gbps": 400.0})
    assert row["regressed"] is True and row["change"] is None and "not a usable figure" in row["message"]


def test_a_smoke_baseline_with_an_absurd_figure_is_unusable():
    problems = smoke_verdict.metric_problems({"busbw_large_gbps": 1e-300})
    assert problems and "busbw_large_gbps" in problems[0]


# --- the bandwidth verdict ------------------------------------------------------------------------

NODES = ["node1", "node2", "node3", "node4"]


@pytest.mark.parametrize("value", [float("nan"), float("-inf"), -1, None, "12", 1e-300],
                         ids=["nan", "-inf", "-1", "None", "str12", "1e-300"])
def test_a_ring_link_whose_figure_is_no_figure_is_slow_not_passed(value):
    ring = [dict(link, gbps=3.0) for link in bandwidth.ring_links(NODES)]
    ring[1]["gbps"] = value
    per_node = {n: {"gbps": 20.0} for n in NODES}
    pairs = [dict(p, gbps=3.0) for p in bandwidth.isolation_pairs(NODES, [ring[1]])[1]]
    pairs[0]["gbps"] = value  # the retest alone is broken too
    findings, verdict = bandwidth.name_culprits(NODES, ring, per_node, pairs)
    assert verdict["slow_ring_links"] and verdict["slow_ring_links"][0]["src"] == "node2"
    assert any(f["severity"] == "fail" and "node2" == f["node"] for f in findings)
    json.dumps([findings, verdict], allow_nan=False)


def test_an_infinite_ring_figure_does_not_raise_the_floor_nor_pass():
    ring = [dict(link, gbps=3.0) for link in bandwidth.ring_links(NODES)]
    ring[0]["gbps"] = float("inf")
    assert bandwidth.floor_for([e["gbps"] for e in ring]) == 1.5
    assert [e["src"] for e in bandwidth.slow_entries(ring, 1.5)] == ["node1"]


@pytest.mark.parametrize("value", [float("nan"), "12", -1], ids=["nan", "str12", "-1"])
def test_a_loopback_figure_that_is_no_figure_is_named(value):
    per_node = {n: {"gbps": 20.0} for n in NODES}
    per_node["node3"]["gbps"] = value
    ring = [dict(link, gbps=3.0) for link in bandwidth.ring_links(NODES)]
    findings, _verdict = bandwidth.name_culprits(NODES, ring, per_node, [])
    assert [(f["code"], f["node"]) for f in findings] == [("BANDWIDTH_NODE_SLOW_INTRA", "node3")]
    json.dumps(findings, allow_nan=False)


def test_a_rail_figure_that_is_no_figure_makes_its_link_unmeasured():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth_plan import test_figure
    result = {"test": {"src": "a", "dst": "b", "client": "a", "network": "rdma", "tool": "ib_write_bw",
                       "rails": [{"rail": 0, "client_device": "mlx5_0", "server_device": "mlx5_0"},
                                 {"rail": 1, "client_device": "mlx5_1", "server_device": "mlx5_1"}]},
              "results": [{"rail": 0, "gbps": 390.0}, {"rail": 1, "gbps": float("nan")}]}
    entry = test_figure(result)
    assert entry["gbps"] is None and "need a finite number" in entry["error"]


# --- N17: a lone node's GPU count -----------------------------------------------------------------

def test_a_lone_node_is_held_to_the_expected_gpu_count():
    report = homogeneity.homogeneity({"node1": {"gpu_count": 7}}, ["gpu_count"], expected={"gpu_count": 8})
    assert report["homogeneous"] is False and report["not_checked"] == []
    (finding,) = homogeneity.outlier_findings(report)
    assert finding["code"] == "HOMOGENEITY_OUTLIER" and finding["value"] == 7 and finding["threshold"] == 8
    assert "expected 8" in finding["message"] and "gpufleet_expected_gpu_count" in finding["message"]


def test_a_lone_node_without_an_expected_count_says_its_gpu_count_was_not_checked():
    report = homogeneity.homogeneity({"node1": {"gpu_count": 7, "kernel": "6.1"}}, ["gpu_count", "kernel"])
    findings = homogeneity.outlier_findings(report)
    assert [(f["code"], f["severity"]) for f in findings] == [("HOMOGENEITY_NOT_CHECKED", "warn")]
    assert "GPU count: not checked (one node)" in findings[0]["message"]
    assert report["not_checked"][0]["check"] == "gpu_count"


def test_the_expected_count_also_holds_a_cluster_that_lost_the_same_gpu_everywhere():
    nodes = {"node1": {"gpu_count": 8}, "node2": {"gpu_count": 7}, "node3": {"gpu_count": 7}}
    report = homogeneity.homogeneity(nodes, ["gpu_count"], expected={"gpu_count": 8})
    assert sorted(f["node"] for f in homogeneity.outlier_findings(report)) == ["node2", "node3"]
    assert homogeneity.homogeneity(nodes, ["gpu_count"], expected={"gpu_count": 0})["outlier_nodes"] == ["node1"]


def test_a_node_whose_torch_sees_none_of_its_gpus_says_so():
    cpu = json.dumps({"device": "cpu", "index": None, "name": "AMD EPYC", "gemm_tflops": {"fp32": 0.03},
                      "gemm_skipped": {}, "copy_gbps": 9.6})
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run([cpu])}, expected_gpus={"node1": 8})
    assert result["findings"] == []
    assert any("torch saw none of the 8 GPU(s)" in n["reason"] for n in result["not_checked"])


def test_a_gpu_whose_copy_failed_fails_with_the_error():
    line = json.loads(_line(2))
    line.update(copy_gbps=None, copy_error="CUDA error: an illegal memory access was encountered")
    lines = [_line(i) for i in range(8)]
    lines[2] = json.dumps(line)
    result = gpu_compute.compute_verdict(["node1"], {"node1": _run(lines)}, expected_gpus=8)
    (finding,) = result["findings"]
    assert finding["code"] == "FIGURE_INVALID" and finding["gpu_index"] == 2 and "illegal memory access" in finding["message"]


def test_a_10000_deep_smoke_baseline_is_a_reason_not_a_crash(tmp_path):
    from ansible_collections.gpufleet.cluster.plugins.action import smoke_report as action
    path = tmp_path / "baseline.json"
    path.write_text("[" * 10000 + "]" * 10000)
    document, why = action.read_baseline(str(path))
    assert document is None and "nested too deeply" in why


@pytest.mark.parametrize("value", [float("nan"), "12", None], ids=["nan", "str12", "None"])
def test_the_slow_links_filter_names_a_link_whose_figure_is_no_figure(value):
    from ansible_collections.gpufleet.cluster.plugins.filter import bandwidth_isolation as flt
    ring = [dict(link, gbps=3.0) for link in bandwidth.ring_links(NODES)]
    ring[2]["gbps"] = value
    assert [(e["src"], e["dst"]) for e in flt.bandwidth_slow_links(ring)] == [("node3", "node4")]


def test_the_homogeneity_filter_passes_the_expected_count_and_refuses_a_non_mapping():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import homogeneity as flt
    report = flt.homogeneity({"node1": {"gpu_count": 7}}, ["gpu_count"], [], {"gpu_count": 8})
    assert report["outlier_nodes"] == ["node1"]
    with pytest.raises(AnsibleFilterError, match="expected must be a mapping"):
        flt.homogeneity({"node1": {"gpu_count": 7}}, ["gpu_count"], [], 8)


@pytest.mark.parametrize("kind, result", [("compute", None), ("compute", "12"), ("nccl", [1]), ("links", {"a": 1}),
                                          ("links", None)])
def test_a_baseline_step_fed_no_result_says_so_instead_of_crashing(kind, result):
    with pytest.raises(ValueError, match="the %s result must be" % kind):
        nb.current_metrics(kind, result)


def test_a_baseline_step_reads_each_kind_of_result():
    assert nb.current_metrics("compute", {"gpus": []}) == {}
    assert nb.current_metrics("links", []) == {}
