"""The smoke job on the converged fleet, run alone (playbooks/smoke_test.yml, the regression check of
infrastructure pipelines): the baseline the converge stored beaten by a far better one, and node3's link cut
before the run. Durations are the ones the job reports, never wall clocks. A passing two-node job with every
report is test_faults_diagnostics.py's (the nodes its diag fault leaves), the passing three-node one the
converge's.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import fleet as fleet_lib
from simharness import REPO_ROOT

pytestmark = pytest.mark.sim
PLAYBOOK = REPO_ROOT / "playbooks" / "smoke_test.yml"


def _run(fleet, tmp: Path, *args: str):
    reports = tmp / "reports"
    proc = fleet.playbook(PLAYBOOK, "-e", f"gpufleet_report_dir={reports}",
                          "-e", f"gpufleet_baseline_dir={tmp / 'baselines'}", *args, timeout=900)
    doc = json.loads((reports / "smoke.json").read_text()) if (reports / "smoke.json").exists() else None
    return proc, doc, reports


def test_three_nodes_regress_against_a_far_better_baseline(fleet, tmp_path):
    """The converge's passing job stored the cluster's baseline; made 100x better (beyond any run-to-run
    noise of shared CPUs), the next run fails as a regression, naming the metric and both values."""
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    base = json.loads((fleet.converge.baselines / fleet_lib.SMOKE_BASELINE).read_text())
    base["metrics"]["busbw_large_gbps"] *= 100
    (baselines / fleet_lib.SMOKE_BASELINE).write_text(json.dumps(base))
    proc, doc, reports = _run(fleet, tmp_path, "--limit", "converged")
    assert proc.returncode != 0
    fleet_lib.assert_smoke_reports(reports, doc, 3)
    # The limit chose the job's nodes: the fleet's fresh node4 is left out.
    assert doc["hosts_expected"] == ["node1", "node2", "node3"]
    assert not doc["verdict"]["passed"] and sorted(doc["nodes_joined"]) == ["node1", "node2", "node3"]
    (reason,) = [r for r in doc["verdict"]["reasons"] if r.startswith("baseline:")]
    assert "busbw_large_gbps regressed" in reason
    assert "%.3f" % base["metrics"]["busbw_large_gbps"] in reason
    assert "%.3f" % doc["sweep"]["busbw_large_gbps"] in reason
    assert "busbw_large_gbps regressed" in proc.stdout
    svg = ET.parse(reports / "smoke_busbw.svg").getroot()
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2  # this run and the baseline


def test_cut_link_fails_at_the_join_timeout_naming_the_node(fleet, tmp_path):
    join_timeout = 10
    fleet.sim.fault("node3", "link-cut")
    try:
        proc, doc, reports = _run(fleet, tmp_path, "--limit", "converged",
                                  "-e", f"smoke_test_join_timeout={join_timeout}")
    finally:
        fleet.sim.clear("node3", "link-cut")
    assert proc.returncode != 0
    assert doc is not None and not doc["verdict"]["passed"]
    assert [m["node"] for m in doc["missing_nodes"]] == ["node3"]
    assert doc["verdict"]["reasons"][0].startswith("nodes_joined: node3: cut off")
    assert "node3: cut off" in proc.stdout
    # The roll call is the only wait, and it ends at the join timeout on every node (the job's own clock).
    assert all(n["status"] == "rollcall_failed" for n in doc["nodes"]), doc["nodes"]
    waits = {n["name"]: n["rollcall_s"] for n in doc["nodes"]}
    assert all(w is not None and join_timeout - 1 <= w <= join_timeout + 10 for w in waits.values()), waits
    junit = ET.parse(reports / "smoke.junit.xml").getroot()
    failed = {c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None}
    assert "nodes_joined" in failed
