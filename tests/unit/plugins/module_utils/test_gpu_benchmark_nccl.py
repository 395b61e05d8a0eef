"""nccl-tests runs judged with the smoke job's floors, on the real H100 logs (tests/fixtures/nccl-tests).

Slower runs are the same logs with their measured times stretched by the simulator's own transform
(tests/sim/standins/nccl_tests: rewrite), so the figures judged here are the ones the stand-ins print.
"""

import argparse
import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_benchmark as gb
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat
from fixtures_path import FIXTURES

REPO = Path(__file__).resolve().parents[4]
LOGS = FIXTURES / "nccl-tests"
SINGLE = (LOGS / "h100-1node-8gpu-nccl2.29.2-tests2.17.8-all-collectives.log").read_text()
PAIR = (LOGS / "h100-2node-16gpu-pairwise-nccl2.29.2-tests2.17.8-alltoall-sendrecv.log").read_text()
MULTI = (LOGS / "h100-10node-80gpu-nccl2.29.2-tests2.17.8-all-collectives.log").read_text()
IBSTAT = parse_ibstat((FIXTURES / "ibstat" / "h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt").read_text())
H100 = {"status": "ok", "driver_gpu_count": 8, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}


def _standin():
    path = REPO / "tests" / "sim" / "standins" / "nccl_tests"
    loader = importlib.machinery.SourceFileLoader("nccl_tests_standin", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


STANDIN = _standin()


def replay(capture, collective, hosts, factor=1.0, minbytes=32 << 20, maxbytes=16 << 30):
    args = argparse.Namespace(minbytes=minbytes, maxbytes=maxbytes)
    return STANDIN.rewrite(STANDIN.section(capture, collective), collective, hosts, args, factor)[0]


def test_the_single_node_capture_passes_the_h100_floor():
    summary = gb.nccl_run_summary(SINGLE, 0, "all_reduce", expected_ranks=8)
    assert summary["problems"] == [] and summary["nranks"] == 8
    assert summary["busbw_gbps"] == 482.27  # the peak over sizes >= 256 MiB
    floor, source = gb.nccl_floor("all_reduce", "h100-sxm5-80gb", 8, 1)
    assert floor == 460.0 and "aznhc" in source
    assert gb.judge_run("single-node", summary, floor, source, ["node1"], "all_reduce_perf") == []


def test_a_slow_gpu_drags_the_node_below_its_floor():
    summary = gb.nccl_run_summary(replay(SINGLE, "all_reduce", ["node2"], factor=0.4), 0, "all_reduce", 8)
    findings = gb.judge_run("single-node", summary, 460.0, "aznhc", ["node2"], "all_reduce_perf")
    assert [(f["node"], f["code"]) for f in findings] == [("node2", "NCCL_TESTS_BUSBW_LOW")]
    assert findings[0]["value"] == pytest.approx(482.27 * 0.4, abs=0.1) and findings[0]["threshold"] == 460.0


@pytest.mark.parametrize("log, rc, ranks, problem", [
    (SINGLE, 1, 8, "exit status 1"),
    ("", 0, 8, "no all_reduce table in the output"),
    (SINGLE, 0, 16, "8 rank(s) ran, 16 expected (is nccl-tests built with MPI=1?)"),
    (SINGLE.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED", 1), 0, 8,
     "out-of-bounds values FAILED"),
])
def test_runs_that_cannot_be_trusted_fail_with_the_reason(log, rc, ranks, problem):
    summary = gb.nccl_run_summary(log, rc, "all_reduce", ranks)
    assert problem in summary["problems"]
    findings = gb.judge_run("single-node", summary, 460.0, "aznhc", ["node1"], "all_reduce_perf")
    assert [f["code"] for f in findings] == ["NCCL_TESTS_FAILED"] and problem in findings[0]["message"]


def test_floors_across_nodes_come_from_the_fabric():
    assert gb.nccl_floor("all_reduce", "h100-sxm5-80gb", 8, 2, rdma_gbps_per_node=3200)[0] == pytest.approx(300.0)
    floor, source = gb.nccl_floor("sendrecv", "h100-sxm5-80gb", 8, 2, rail_gbps=400)
    assert floor == pytest.approx(37.5) and "one rail" in source
    assert gb.nccl_floor("sendrecv", "h100-sxm5-80gb", 8, 2)[0] is None
    assert gb.nccl_floor("all_reduce", "h100-sxm5-80gb", 8, 2, override=123) == (123.0, "gpu_benchmark_thresholds")


def test_launcher_commands():
    hosts = [("10.0.0.1", 8), ("10.0.0.2", 8)]
    assert gb.launcher_argv("mpirun", ["mpirun", "--allow-run-as-root"], hosts, "/b/all_reduce_perf", ["-b", "32M"]) == [
        "mpirun", "--allow-run-as-root", "-np", "16", "-H", "10.0.0.1:8,10.0.0.2:8", "/b/all_reduce_perf", "-b", "32M",
        "-g", "1"]
    assert gb.launcher_argv("srun", ["srun", "--mpi=pmix"], hosts, "/b/sendrecv_perf", []) == [
        "srun", "--mpi=pmix", "--nodes", "2", "--ntasks-per-node", "8", "--nodelist", "10.0.0.1,10.0.0.2",
        "/b/sendrecv_perf", "-g", "1"]
    with pytest.raises(ValueError):
        gb.launcher_argv("srun", [], [("a", 8), ("b", 4)], "x", [])
    with pytest.raises(ValueError):
        gb.launcher_argv("pdsh", [], hosts, "x", [])


def test_the_step_names_the_node_whose_link_is_slow_and_judges_every_run():
    nodes = ["node1", "node2", "node3", "node4"]
    facts = {n: gb.node_facts(H100, {"cas": IBSTAT}) for n in nodes}
    assert facts["node1"] == {"gpus": 8, "gpu_name": "NVIDIA H100 80GB HBM3", "model_key": "h100-sxm5-80gb",
                              "rdma_gbps": 3200.0, "rail_gbps": 400.0}

    def pair(a, b, round_name):
        factor = 0.01 if "node3" in (a, b) else 1.0
        log = replay(PAIR, "sendrecv", [a, b], factor, minbytes=4 << 30, maxbytes=16 << 30)
        return {"log": log, "rc": 0, "binary": "sendrecv_perf", "collective": "sendrecv", "nodes": [a, b],
                "round": round_name}

    ring = [pair(a, b, "ring") for a, b in (("node1", "node2"), ("node2", "node3"), ("node3", "node4"), ("node4", "node1"))]
    figures = gb.pair_figures(ring, facts)
    assert {(f["src"], f["dst"]) for f in figures if f["gbps"] < f["rate_floor_gbps"]} == {
        ("node2", "node3"), ("node3", "node2"), ("node3", "node4"), ("node4", "node3")}
    runs = {"single": {n: {"log": replay(SINGLE, "all_reduce", [n]), "rc": 0, "binary": "all_reduce_perf"} for n in nodes},
            "multi": {"log": replay(MULTI, "all_reduce", nodes, 0.01), "rc": 0, "binary": "all_reduce_perf", "nodes": nodes},
            "pairs": ring + [pair("node3", "node1", "pairs"), pair("node2", "node4", "pairs")]}
    result = gb.nccl_verdict(nodes, facts, runs)
    codes = sorted({(f["node"], f["code"]) for f in result["findings"]})
    # The multi-node run through node3's link is slow for all four; the pairwise search names node3 alone.
    assert ("node3", "BANDWIDTH_NODE_SLOW") in codes
    assert [c for c in codes if c[1] == "BANDWIDTH_NODE_SLOW"] == [("node3", "BANDWIDTH_NODE_SLOW")]
    assert {c[0] for c in codes if c[1] == "NCCL_TESTS_BUSBW_LOW"} == set(nodes)
    assert result["pair_verdict"]["slow_nodes"] == ["node3"]
    assert [r["busbw_gbps"] for r in result["runs"]["single"]] == [482.27] * 4
    assert result["not_checked"] == []
    assert any(line.startswith("single all_reduce_perf on node1: 482.27 GB/s, floor 460.00") for line in result["summary"])


def test_what_did_not_run_is_listed_with_the_reason():
    facts = {"node1": gb.node_facts({"status": "no_driver"}, {})}
    runs = {"single": {"node1": {"reason": "nccl-tests is not installed in /usr/bin"}}, "multi": {"reason": "fewer than two nodes"}}
    result = gb.nccl_verdict(["node1"], facts, runs)
    assert result["findings"] == []
    assert [(n["check"], n["reason"]) for n in result["not_checked"]] == [
        ("nccl-tests within the node", "nccl-tests is not installed in /usr/bin"),
        ("nccl-tests across nodes", "fewer than two nodes")]


@pytest.mark.parametrize("figure", [None, float("nan"), float("inf"), -1.0], ids=["None", "nan", "inf", "-1"])
def test_a_run_whose_busbw_is_no_figure_fails_instead_of_passing(monkeypatch, figure):
    # What the parser hands over when a table has no usable busbw (issue 35): before, None passed every floor
    # (the comparison was skipped) and NaN too (NaN < floor is False).
    band = {"busbw_gbps": figure, "collapse": None}
    monkeypatch.setattr(gb, "large_message_band", lambda test, min_size_bytes=None: band)
    summary = gb.nccl_run_summary(SINGLE, 0, "all_reduce", 8)
    assert summary["busbw_gbps"] is None and any("busbw at messages" in p for p in summary["problems"])
    findings = gb.judge_run("single-node", summary, 460.0, "aznhc", ["node1"], "all_reduce_perf")
    assert [f["code"] for f in findings] == ["NCCL_TESTS_FAILED"]


@pytest.mark.parametrize("override", [float("nan"), float("inf"), -1, "x"], ids=["nan", "inf", "-1", "x"])
def test_an_override_floor_that_is_no_figure_is_no_floor_and_says_why(override):
    floor, source = gb.nccl_floor("all_reduce", "h100-sxm5-80gb", 8, 1, override=override)
    assert floor is None and "gpu_benchmark_thresholds" in source


def test_a_collapse_is_named_in_the_low_busbw_finding(monkeypatch):
    """The band's fall (nccl_tests.band_busbw) is said in the finding, not only its lowest figure."""
    collapse = {"text": "busbw fell from 45.87 GB/s at 4 GiB to 5.73 GB/s at 16 GiB (-88 %; band 4 GiB to 16 GiB)"}
    band = {"busbw_gbps": 5.73, "collapse": collapse}
    monkeypatch.setattr(gb, "large_message_band", lambda test, min_size_bytes=None: band)
    summary = gb.nccl_run_summary(SINGLE, 0, "all_reduce", 8)
    findings = gb.judge_run("single-node", summary, 37.5, "per-rail floor", ["node1"], "sendrecv_perf")
    assert [f["code"] for f in findings] == ["NCCL_TESTS_BUSBW_LOW"]
    assert findings[0]["message"].endswith("; " + collapse["text"])


def test_a_test_that_failed_before_its_table_fails_with_nccl_tests_own_words():
    log = (FIXTURES / "nccl-tests" / "rtx-a6000-2node-4gpu-all_reduce_perf-failed-before-table-nccl-tests-issue219.log"
           ).read_text()
    summary = gb.nccl_run_summary(log, 1, "all_reduce", 4)
    assert any("internal error" in p for p in summary["problems"]), summary["problems"]
