"""A node whose DCGM diagnostic fails is named with its finding code by `gpufleet run validate`, and the
healthy nodes still train: the smoke job runs on the nodes the earlier plays left in the run. As a pipeline
sees it, the run exits with the "nodes failed" code and names the node on stderr and in the summary.

node2 gets `gpu-diag-fail` (the stand-in dcgmi replays a real failing document). The bandwidth and
benchmark stages are skipped: this test is about neither (test_faults_bandwidth.py is about the first, the
converge runs the second). The smoke job on the two nodes left is the fast tier's passing two-node job: every
report is checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import fleet as fleet_lib

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-summary.schema.json").read_text())


def test_validate_names_the_diag_failure_and_the_others_still_train(fleet, tmp_path):
    artifacts = tmp_path / "artifacts"
    fleet.sim.fault("node2", "gpu-diag-fail")
    try:
        proc, summary = fleet.gpufleet(artifacts, "validate", "--limit", "converged", "--skip-tags", "bandwidth,benchmark",
                                       "--baseline-dir", str(tmp_path / "baselines"))
    finally:
        fleet.sim.clear("node2", "gpu-diag-fail")
    out = proc.stdout[-6000:] + proc.stderr[-3000:]
    jsonschema.validate(summary, SCHEMA)
    # As a pipeline sees it: the "nodes failed" exit code, the node named on stderr and in the summary.
    assert proc.returncode == 1, out
    assert "nodes failed: node2" in proc.stderr, proc.stderr[-3000:]
    assert summary["failed_nodes"] == ["node2"], out
    assert summary["ready_nodes"] == ["node1", "node3"], out
    fails = {n: {f["code"] for f in summary["nodes"][n]["findings"] if f["severity"] == "fail"}
             for n in ("node1", "node2", "node3")}
    assert "DCGM_FR_PERSISTENCE_MODE" in fails["node2"], summary["nodes"]["node2"]["findings"]
    assert not fails["node1"] and not fails["node3"], fails

    diag = json.loads((artifacts / "reports" / "diagnostics" / "node1.json").read_text())
    assert diag["status"] == "pass" and diag["dcgm"]["level"] == 1 and diag["dcgm"]["tests_run"] == ["software"]
    # The healthy nodes still train; a CPU run says gloo.
    assert summary["smoke"]["passed"] is True and summary["smoke"]["backend"] == "gloo", summary["smoke"]
    smoke = json.loads((artifacts / "reports" / "smoke.json").read_text())
    assert smoke["hosts_expected"] == ["node1", "node3"] and sorted(smoke["nodes_joined"]) == ["node1", "node3"]
    assert smoke["verdict"]["passed"], smoke["verdict"]["reasons"]
    fleet_lib.assert_smoke_reports(artifacts / "reports", smoke, 2)
