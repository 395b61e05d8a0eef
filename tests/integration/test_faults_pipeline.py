"""`gpufleet run` on the fleet, as a pipeline sees it: a node given uncorrectable ECC errors makes the
run exit with the "nodes failed" code, named on stderr and in the summary, while the healthy nodes stay
ready. (A healthy `gpufleet run site` exiting 0 is the fleet's converge: test_converge.py. A bad
inventory is covered without a cluster in tests/unit/gpufleet.)
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-summary.schema.json").read_text())


def test_faulted_node_exits_with_nodes_failed_and_is_named(fleet, tmp_path):
    fleet.sim.fault("node2", "ecc-uncorrectable")
    try:
        proc, summary = fleet.gpufleet(tmp_path / "artifacts", "validate", "--tags", "health", "--limit", "converged")
    finally:
        fleet.sim.clear("node2")
    jsonschema.validate(summary, SCHEMA)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "nodes failed: node2" in proc.stderr
    assert summary["failed_nodes"] == ["node2"] and summary["ready_nodes"] == ["node1", "node3"]
    codes = {f["code"] for f in summary["nodes"]["node2"]["findings"] if f["severity"] == "fail"}
    assert codes & {"ECC_UNCORRECTABLE_VOLATILE", "ECC_UNCORRECTABLE_AGGREGATE"}, codes
    for node in ("node1", "node3"):
        assert not [f for f in summary["nodes"][node]["findings"] if f["severity"] == "fail"]
