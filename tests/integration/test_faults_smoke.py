"""The smoke job on the converged fleet: gloo over the bridge on two nodes, every report, the baseline the
converge stored beaten by a far better one, and node3's link cut before the run. Durations are the ones
the job reports, never wall clocks.
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


def _assert_reports(reports: Path, doc: dict, n: int):
    assert doc["backend"] == "gloo" and doc["device"] == "cpu" and doc["nccl"] is None
    assert doc["world_size"] == n and doc["nnodes"] == n
    rows = doc["sweep"]["rows"]
    assert rows[0]["size_bytes"] == 8 and rows[-1]["size_bytes"] == 64 * 1024 * 1024
    for row in rows:
        assert row["wrong"] == 0
        assert row["busbw_gbps"] == row["algbw_gbps"] * (2 * (n - 1) / n)
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-12)
    t = doc["training"]
    assert t["loss_last"] < t["loss_first"] and t["params_in_sync"] and t["nonfinite_values"] == 0
    junit = ET.parse(reports / "smoke.junit.xml").getroot()
    assert {c.get("name") for c in junit.iter("testcase")} >= {"nodes_joined", "loss_decreased", "params_in_sync"}
    svg = ET.parse(reports / "smoke_busbw.svg").getroot()
    assert svg.find("{http://www.w3.org/2000/svg}polyline") is not None
    assert "**gloo**" in (reports / "smoke.md").read_text()


def test_two_nodes_selected_with_limit(fleet, tmp_path):
    proc, doc, reports = _run(fleet, tmp_path, "--limit", "node1,node2")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert doc["verdict"]["passed"], doc["verdict"]["reasons"]
    assert doc["hosts_expected"] == ["node1", "node2"] and sorted(doc["nodes_joined"]) == ["node1", "node2"]
    _assert_reports(reports, doc, 2)


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
    _assert_reports(reports, doc, 3)
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
