"""The preflight playbook on the simulated cluster: a healthy set of H100 nodes passes and
writes the reports; one A100 node among them fails, and only that node is named.

The sim nodes are containers (veth NIC, no NVMe, little RAM, no HCA), so the tests check
against a custom profile that extends `training` and relaxes only those host-side
thresholds; the GPU checks (model allow-list, VRAM, ECC, persistence) stay as built in.
Bad inventory values fail before any node is touched: tests/unit/roles/test_preflight_bad_input.py.
"""
from __future__ import annotations

import json
import re

import pytest

from simharness import cluster as sim_cluster

PLAYBOOK = "playbooks/preflight.yml"
NAME = "pre"
RELAXED = {
    "gpufleet_custom_profiles": {
        "sim": {
            "extends": "training",
            "require_nvme": False,
            "min_nic_gbps": None,
            "min_ram_per_vram": None,
            "min_cpu_cores_per_gpu": None,
            "require_rdma_multinode": False,
        }
    },
    "gpufleet_profile": "sim",
}


@pytest.fixture(scope="module")
def cluster():
    with sim_cluster(NAME, 3, profile=["node3=a100-sxm4"], preinstall=["driver=535.183.01"]) as running:
        yield running


def run(cluster, tmp_path, *extra, extra_vars=None):
    ev = dict(RELAXED, gpufleet_report_dir=str(tmp_path))
    ev.update(extra_vars or {})
    proc = cluster.playbook(PLAYBOOK, "-e", json.dumps(ev), *extra)
    return proc, proc.stdout + proc.stderr


def test_healthy_nodes_pass_and_write_reports(cluster, tmp_path):
    proc, out = run(cluster, tmp_path, "--limit", "node1,node2")
    assert proc.returncode == 0, out[-4000:]
    # one summary table and the plan, printed once
    assert out.count("| node | gpus |") == 1
    assert re.search(r"\| node1 \| 8 x NVIDIA H100 80GB HBM3 \| 80 \| nvidia-smi \| 535\.183\.01 .*\| pass \|", out)
    assert "| driver_branch | 535 |" in out
    report = json.loads((tmp_path / "preflight.json").read_text())
    assert report["passed"] is True and report["failed_nodes"] == []
    assert report["homogeneity"]["homogeneous"] is True
    assert report["profile"]["name"] == "sim" and report["profile"]["extends"] == ["training"]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["driver_branch"] == "535" and plan["nvswitch"] is True
    md = (tmp_path / "preflight.md").read_text()
    assert md.startswith("<!--") and "## Nodes" in md and "## Findings" in md and "## Homogeneity" in md


def test_one_a100_among_h100s_fails_naming_only_that_node(cluster, tmp_path):
    proc, out = run(cluster, tmp_path)
    assert proc.returncode != 0
    failed = sorted(set(re.findall(r"fatal: \[(\w+)\]", out)))
    assert failed == ["node3"], out[-4000:]
    assert "node3: gpu_model is 'NVIDIA A100-SXM4-80GB', expected 'NVIDIA H100 80GB HBM3' (2 of 3 nodes)" in out
    # healthy nodes' names appear in no reason, and no table of healthy nodes is printed
    reasons = [ln for ln in out.splitlines() if re.match(r"\s*node\d: ", ln)]
    assert reasons and all(ln.strip().startswith("node3: ") for ln in reasons)
    assert "| node1 |" not in out
    report = json.loads((tmp_path / "preflight.json").read_text())
    assert report["passed"] is False and report["failed_nodes"] == ["node3"]
    assert report["homogeneity"]["outlier_nodes"] == ["node3"]
    assert {f["node"] for f in report["findings"]} == {"node3"}
    md = (tmp_path / "preflight.md").read_text()
    assert re.search(r"\| gpu_model \| NVIDIA A100-SXM4-80GB \| node3 \| NVIDIA H100 80GB HBM3 \|", md)


def test_warn_mode_reports_without_stopping(cluster, tmp_path):
    proc, out = run(cluster, tmp_path, extra_vars={"preflight_mode": "warn"})
    assert proc.returncode == 0, out[-4000:]
    assert "Findings (warn mode, not stopping)" in out and "node3: gpu_model is" in out
    assert json.loads((tmp_path / "preflight.json").read_text())["failed_nodes"] == ["node3"]


def test_built_in_training_profile_stops_container_nodes(cluster, tmp_path):
    """Without the relaxed profile the sim's containers fail the host checks: no NVMe, too little RAM."""
    proc, out = run(cluster, tmp_path, "--limit", "node1,node2", extra_vars={"gpufleet_profile": "training"})
    assert proc.returncode != 0
    assert "node1: nvme_count is 0, expected >= 1 (profile training)" in out
