"""`gpufleet run` against the simulated cluster: what a pipeline sees.

A healthy validate run exits 0 with a complete summary; a node given uncorrectable ECC errors makes
the run exit with the "nodes failed" code, named on stderr and in the summary, while the healthy
node stays ready. (A bad inventory is covered without a cluster in tests/unit/gpufleet.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from simharness import VENV_BIN
from simharness import cluster as sim_cluster

pytestmark = [pytest.mark.sim, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-summary.schema.json").read_text())


@pytest.fixture(scope="module")
def cluster():
    with sim_cluster("pipeline", 2, preinstall=["driver=535.183.01", "torch"]) as running:
        yield running


def _gpufleet(cluster, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    artifacts = tmp_path / "artifacts"
    proc = subprocess.run([str(VENV_BIN / "gpufleet"), "run", *args, "-i", str(cluster.inventory),
                           "--artifacts", str(artifacts), "--baseline-dir", str(tmp_path / "baselines")],
                          cwd=tmp_path, env=cluster.env(), capture_output=True, text=True, timeout=900, check=False)
    summary = json.loads((artifacts / "summary.json").read_text())
    jsonschema.validate(summary, SCHEMA)
    return proc, summary


def test_healthy_validate_run_exits_0_with_a_complete_summary(cluster, tmp_path):
    proc, summary = _gpufleet(cluster, tmp_path, "validate")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert summary["result"] == "passed" and summary["ready_nodes"] == ["node1", "node2"]
    # Progress: one line per node per play, each with the elapsed time.
    lines = proc.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[") and "s] " in line and "still running" not in line]
    # The heartbeat names the running task and the nodes still in it while a play takes its time.
    assert any("still running on node1" in line for line in lines), proc.stdout
    for play in ("Check GPU node health", "Prove the cluster trains"):
        assert sum(1 for line in progress if play in line) == 2, proc.stdout
    node = summary["nodes"]["node1"]
    assert set(node["stages"]) == {"Check GPU node health", "Run the GPU diagnostics", "Find slow nodes and links",
                                   "Prove the cluster trains"}
    assert node["versions"]["driver"] == "535.183.01" and node["versions"]["torch"] == "2.13.0+cpu"
    # The smoke verdict is there, and a CPU run says gloo, never NCCL.
    assert summary["smoke"]["passed"] is True and summary["smoke"]["backend"] == "gloo"
    reports = {Path(p).name for p in summary["artifacts"]["reports"]}
    assert {"health.json", "smoke.json", "smoke.junit.xml", "smoke.md", "smoke_busbw.svg"} <= reports
    assert Path(summary["artifacts"]["events"]).is_dir()


def test_faulted_node_exits_with_nodes_failed_and_is_named(cluster, tmp_path):
    cluster.fault("node2", "ecc-uncorrectable")
    try:
        proc, summary = _gpufleet(cluster, tmp_path, "validate", "--tags", "health")
    finally:
        cluster.clear("node2")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "nodes failed: node2" in proc.stderr
    assert summary["failed_nodes"] == ["node2"] and summary["ready_nodes"] == ["node1"]
    codes = {f["code"] for f in summary["nodes"]["node2"]["findings"] if f["severity"] == "fail"}
    assert codes & {"ECC_UNCORRECTABLE_VOLATILE", "ECC_UNCORRECTABLE_AGGREGATE"}, codes
    assert not [f for f in summary["nodes"]["node1"]["findings"] if f["severity"] == "fail"]
