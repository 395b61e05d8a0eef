"""Homogeneity over node summaries built from the real captures."""
import json

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.homogeneity import (
    DEFAULT_PROPERTIES,
    homogeneity,
    outlier_findings,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight_report import (
    build_report,
    failure_messages,
    render_markdown,
    summary_table,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.profiles import node_summary
from test_profiles import A100, H100_X8, gpu_facts, host_facts, rdma_facts


def h100():
    return node_summary(gpu_facts(H100_X8, 4), rdma_facts(), host_facts())


def a100_node():
    """One A100 (the XML capture) made to look like an 8-GPU node so only the model differs."""
    gpu = gpu_facts(A100, 4)
    gpu["gpus"] = gpu["gpus"] * 8
    gpu["pci_gpu_count"] = gpu["driver_gpu_count"] = 8
    return node_summary(gpu, rdma_facts(), host_facts())


def test_homogeneous_h100_cluster():
    nodes = {"node%d" % i: h100() for i in range(1, 5)}
    rep = homogeneity(nodes)
    assert rep["homogeneous"] is True and rep["outliers"] == [] and rep["outlier_nodes"] == []
    assert rep["properties"]["gpu_model"]["majority"] == "NVIDIA H100 80GB HBM3"
    assert rep["properties"]["gpu_model"]["groups"] == [
        {"value": "NVIDIA H100 80GB HBM3", "display": "NVIDIA H100 80GB HBM3", "count": 4,
         "nodes": ["node1", "node2", "node3", "node4"]}]
    assert set(rep["properties"]) == set(DEFAULT_PROPERTIES)


def test_one_a100_among_h100s_is_named():
    nodes = {"node1": h100(), "node2": h100(), "node3": a100_node(), "node4": h100()}
    rep = homogeneity(nodes)
    assert rep["homogeneous"] is False
    assert rep["outlier_nodes"] == ["node3"]
    gm = rep["properties"]["gpu_model"]
    assert gm["majority"] == "NVIDIA H100 80GB HBM3" and gm["majority_count"] == 3 and not gm["tie"]
    assert gm["outliers"] == [{"node": "node3", "value": "NVIDIA A100-SXM4-80GB", "expected": "NVIDIA H100 80GB HBM3"}]
    props = {o["property"] for o in rep["outliers"]}
    # The A100 capture differs in model, VRAM, driver and VBIOS too; every outlier is node3.
    assert {"gpu_model", "vram_mib", "driver_version", "vbios_version"} <= props
    assert {o["node"] for o in rep["outliers"]} == {"node3"}
    findings = outlier_findings(rep)
    assert findings and all(f["code"] == "HOMOGENEITY_OUTLIER" and f["node"] == "node3" for f in findings)
    msg = [f["message"] for f in findings if "gpu_model" in f["message"]][0]
    assert msg == ("node3: gpu_model is 'NVIDIA A100-SXM4-80GB', expected 'NVIDIA H100 80GB HBM3' (3 of 4 nodes)")
    for f in findings:
        assert validate_finding(f) == []


def test_allow_mixed_reports_but_raises_nothing():
    a, b = h100(), h100()
    b["kernel"] = "6.1.0-18-amd64"
    rep = homogeneity({"a": a, "b": b, "c": h100()}, allow_mixed=["kernel"])
    assert rep["homogeneous"] is True and rep["outlier_nodes"] == []
    assert rep["outliers"][0]["allowed"] is True
    assert rep["properties"]["kernel"]["mixed_allowed"] is True
    assert outlier_findings(rep) == []


def test_unknown_values_are_their_own_group():
    # bare cluster: no driver anywhere is homogeneous
    rep = homogeneity({"a": {"driver_version": None}, "b": {"driver_version": None}}, ["driver_version"])
    assert rep["homogeneous"] and rep["properties"]["driver_version"]["unknown"] == ["a", "b"]
    # one node without a driver among installed ones is an outlier
    rep = homogeneity({"a": {"driver_version": "535.183.01"}, "b": {}, "c": {"driver_version": "535.183.01"}},
                      ["driver_version"])
    out = rep["properties"]["driver_version"]["outliers"]
    assert out == [{"node": "b", "value": None, "expected": "535.183.01"}]
    assert outlier_findings(rep)[0]["message"] == "b: driver_version is unknown, expected '535.183.01' (2 of 3 nodes)"


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]])
def test_tie_break_is_independent_of_node_order(order):
    values = {"a": {"gpu_count": 8}, "b": {"gpu_count": 4}}
    rep = homogeneity({n: values[n] for n in order}, ["gpu_count"])
    info = rep["properties"]["gpu_count"]
    assert info["tie"] is True and info["majority"] == 4  # smallest value wins a tie
    assert "no clear majority" in outlier_findings(rep)[0]["message"]


def test_tie_prefers_known_over_unknown():
    rep = homogeneity({"a": {"kernel": None}, "b": {"kernel": "6.1"}}, ["kernel"])
    assert rep["properties"]["kernel"]["majority"] == "6.1"
    assert rep["outlier_nodes"] == ["a"]


def test_lists_and_numbers_compare_by_value():
    rep = homogeneity({"a": {"x": [1, 2]}, "b": {"x": [1, 2]}, "c": {"x": 1}, "d": {"x": "1"}}, ["x"])
    groups = rep["properties"]["x"]["groups"]
    assert [g["count"] for g in groups] == [2, 1, 1]
    assert groups[1]["value"] == 1 and groups[2]["value"] == "1"  # numbers sort before text


def test_report_and_markdown():
    nodes = {"node1": h100(), "node2": h100(), "node3": a100_node()}
    rep = homogeneity(nodes)
    report = build_report("c1", {"name": "training", "extends": [], "min_vram_gib": 40}, "strict", nodes, [],
                          rep, outlier_findings(rep), plan={"driver_branch": "535"})
    assert report["passed"] is False and report["failed_nodes"] == ["node3"]
    json.dumps(report)  # JSON-ready
    md = render_markdown(report)
    assert "| node3 |" in md and "FAIL" in md
    assert "## Findings" in md and "## Homogeneity" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| gpu_model |")]
    assert lines and "node3" in lines[0] and "NVIDIA H100 80GB HBM3" in lines[0]
    msgs = failure_messages(report, "node3")
    assert msgs and all(m.startswith("node3: ") for m in msgs)
    assert failure_messages(report, "node1") == []
    table = summary_table(report)
    assert table.count("\n") == 4 and "pass" in table


def test_linear_scaling_10k_nodes():
    import time
    base = h100()
    nodes = {"n%05d" % i: dict(base) for i in range(10000)}
    nodes["n04242"] = dict(base, gpu_model="NVIDIA A100-SXM4-80GB")
    t0 = time.perf_counter()
    rep = homogeneity(nodes)
    assert time.perf_counter() - t0 < 1.0
    assert rep["outlier_nodes"] == ["n04242"]
