"""Acceptance for issue 16 on 4 simulated nodes: a node whose DCGM diagnostic fails and a node with a
slow link are both named in summary.json with their codes; the other two stay ready.

node2 has `gpu-diag-fail` (the stand-in dcgmi replays a real failing document), node3 has `link-slow`
(a 10 mbit/s token bucket on its eth0). `gpufleet run validate` must exit 1 (nodes failed).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from simharness import VENV_BIN, cluster as sim_cluster

pytestmark = [pytest.mark.sim, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-summary.schema.json").read_text())


@pytest.fixture(scope="module")
def cluster():
    with sim_cluster("diag-accept", 4, preinstall=["driver=535.183.01", "torch"],
                     faults=["node2=gpu-diag-fail", "node3=link-slow"]) as running:
        yield running


def test_validate_names_the_diag_failure_and_the_slow_node(cluster, tmp_path):
    artifacts = tmp_path / "artifacts"
    proc = subprocess.run([str(VENV_BIN / "gpufleet"), "run", "validate", "-i", str(cluster.inventory),
                           "--artifacts", str(artifacts), "--baseline-dir", str(tmp_path / "baselines")],
                          cwd=tmp_path, env=cluster.env(), capture_output=True, text=True, timeout=1500, check=False)
    out = proc.stdout[-6000:] + proc.stderr[-3000:]
    summary = json.loads((artifacts / "summary.json").read_text())
    jsonschema.validate(summary, SCHEMA)
    assert proc.returncode == 1, out
    assert summary["failed_nodes"] == ["node2", "node3"], out
    assert summary["ready_nodes"] == ["node1", "node4"], out

    def fail_codes(node):
        return {f["code"] for f in summary["nodes"][node]["findings"] if f["severity"] == "fail"}

    assert "DCGM_FR_PERSISTENCE_MODE" in fail_codes("node2"), summary["nodes"]["node2"]["findings"]
    assert "BANDWIDTH_NODE_SLOW" in fail_codes("node3"), summary["nodes"]["node3"]["findings"]
    assert not fail_codes("node1") and not fail_codes("node4")

    reports = artifacts / "reports"
    diag = json.loads((reports / "diagnostics" / "node1.json").read_text())
    assert diag["status"] == "pass" and diag["dcgm"]["level"] == 1 and diag["dcgm"]["tests_run"] == ["software"]
    bandwidth = json.loads((reports / "bandwidth.json").read_text())
    # node2 left the run at the diagnostics play, so the ring is node1 -> node3 -> node4 -> node1.
    # No RDMA on these nodes: the labelled TCP fallback, iperf3 on the interface NCCL would use.
    assert (bandwidth["network"], bandwidth["tool"]) == ("tcp", "iperf3"), bandwidth["why"]
    assert bandwidth["nodes"] == ["node1", "node3", "node4"]
    assert bandwidth["verdict"]["slow_nodes"] == ["node3"]
    # node3's shaped egress slows its sends (and, in the concurrent ring, maybe the ACKs of what it receives).
    slow = [(link["src"], link["dst"]) for link in bandwidth["verdict"]["slow_ring_links"]]
    assert ("node3", "node4") in slow, bandwidth["ring"]
    # node3 was blamed only after its sends were measured a second time and were slow again.
    assert {"src": "node3", "dst": "node4"} in bandwidth["pairs_confirmed"], bandwidth
    sends = [p for p in bandwidth["pair_results"] if p["src"] == "node3"]
    assert len(sends) > len({(p["src"], p["dst"]) for p in sends}) and all(p["gbps"] < 0.1 for p in sends), sends
    # The healthy nodes still train; a CPU run says gloo.
    assert summary["smoke"]["passed"] is True and summary["smoke"]["backend"] == "gloo", summary["smoke"]
