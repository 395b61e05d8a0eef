"""Per-node baselines: stored from a good run, checked like the smoke job's, and a regression named per node."""

import json

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import node_baseline as nb


def _compute(bf16_gpu0=794.5, gpus=8):
    records = [{"node": "node1", "device": "cuda", "index": i, "name": "NVIDIA H100 80GB HBM3",
                "model_key": "h100-sxm5-80gb", "gemm": {"bf16": {"tflops": bf16_gpu0 if i == 0 else 794.5}},
                "memory": {"gbps": 2540.0}} for i in range(gpus)]
    return {"gpus": records}


def _stored(current):
    return {n: json.dumps(nb.make_node_baseline("c", n, "compute", cur, "2026-12-05T00:00:00Z"))
            for n, cur in current.items()}


def test_a_node_matching_its_baseline_passes_and_a_slower_gpu_regresses():
    base = nb.compute_metrics(_compute())
    assert base["node1"]["hardware_key"] == "h100-sxm5-80gb-x8"
    assert base["node1"]["metrics"]["gpu0.gemm_bf16_tflops"] == 794.5
    same = nb.node_verdict("compute", "c", base, _stored(base))
    assert same["findings"] == [] and not any(c["regressed"] for c in same["comparisons"]["node1"])
    slower = nb.node_verdict("compute", "c", nb.compute_metrics(_compute(bf16_gpu0=675.0)), _stored(base))
    (finding,) = slower["findings"]
    assert finding["code"] == "NODE_REGRESSED" and finding["node"] == "node1"
    assert finding["value"] == {"gpu0.gemm_bf16_tflops": 675.0} and "-15.0 %" in finding["message"]


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d.update(schema="gpufleet.smoke.baseline/1"), "schema is"),
    (lambda d: d["metrics"].update({"gpu0.copy_gbps": float("nan")}), "need a finite number > 0"),
    (lambda d: d["metrics"].update({"gpu0.copy_gbps": -1}), "need a finite number > 0"),
    (lambda d: d.update(hardware_key="h100-sxm5-80gb-x7"), "hardware_key is"),
    (lambda d: d.update(node="node9"), "node is"),
    (lambda d: d.pop("metrics"), "missing key(s) metrics"),
    (lambda d: d.update(metrics={}), "need an object with at least one figure"),
])
def test_a_broken_or_foreign_baseline_fails_with_its_reason(mutate, reason):
    current = nb.compute_metrics(_compute())
    document = nb.make_node_baseline("c", "node1", "compute", current["node1"])
    mutate(document)
    # json writes a NaN as NaN, which json reads back: the metric check has to catch it.
    verdict = nb.node_verdict("compute", "c", current, {"node1": json.dumps(document)})
    (finding,) = verdict["findings"]
    assert finding["code"] == "NODE_BASELINE_UNUSABLE" and reason in finding["message"]


def test_unreadable_and_absent_baselines():
    current = nb.compute_metrics(_compute())
    assert "not JSON" in nb.node_verdict("compute", "c", current, {"node1": "{broken"})["findings"][0]["message"]
    assert "cannot be read" in nb.node_verdict("compute", "c", current, {"node1": {"error": "x cannot be read"}})[
        "findings"][0]["message"]
    absent = nb.node_verdict("compute", "c", current, {"node1": None})
    assert absent["findings"] == [] and "no compute baseline stored for node1" in absent["not_checked"][0]["reason"]


def test_a_gpu_gone_from_the_node_changes_its_hardware_key():
    base = nb.compute_metrics(_compute())
    verdict = nb.node_verdict("compute", "c", nb.compute_metrics(_compute(gpus=7)), _stored(base))
    assert verdict["findings"][0]["code"] == "NODE_BASELINE_UNUSABLE"
    assert "hardware_key is \"h100-sxm5-80gb-x8\", this run's is \"h100-sxm5-80gb-x7\"" in verdict["findings"][0]["message"]


def test_only_passing_nodes_are_stored():
    current = nb.compute_metrics(_compute())
    current["node2"] = dict(current["node1"])
    verdict = nb.node_verdict("compute", "c", current, {}, store=True, failed_nodes={"node2"})
    assert sorted(verdict["to_store"]) == ["node1"] and verdict["to_store"]["node1"]["schema"] == nb.SCHEMA


def _figure(src, dst, gbps, device="mlx5_0"):
    return {"src": src, "dst": dst, "gbps": gbps, "network": "rdma", "tool": "ib_write_bw",
            "rails": [{"src_device": device, "dst_device": device, "gbps": gbps}]}


def test_link_baselines_keep_loopback_and_links_and_skip_peers_not_met_this_run():
    first = nb.link_metrics([_figure("node1", "node1", 400.0), _figure("node1", "node2", 363.0), _figure("node2", "node3", 363.0)])
    assert first["node1"] == {"hardware_key": "rdma-ib_write_bw-mlx5_0",
                              "metrics": {"loopback.ib_write_bw.mlx5_0": 400.0, "link.node2.ib_write_bw.mlx5_0-mlx5_0": 363.0}}
    stored = {n: json.dumps(nb.make_node_baseline("c", n, "links", cur)) for n, cur in first.items()}
    # This run node1's ring successor is node3 (node2 left): the node2 link is not compared; loopback is.
    second = nb.link_metrics([_figure("node1", "node1", 300.0), _figure("node1", "node3", 363.0)])
    verdict = nb.node_verdict("links", "c", second, stored)
    assert [c["metric"] for c in verdict["comparisons"]["node1"]] == ["loopback.ib_write_bw.mlx5_0"]
    assert verdict["findings"][0]["code"] == "NODE_REGRESSED"
