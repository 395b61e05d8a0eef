"""The fleet's first converge, `gpufleet run site` on three bare HGX H100 nodes, judged by what it left:
the exit code and the pipeline summary, stack.json, the reports of every stage, and the smoke verdict.

These tests judge the converge itself, so on a cached converged image (same inputs) they are skipped,
and an image is kept only when they all passed (tests/integration/fleet.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import fleet as fleet_lib

pytestmark = [pytest.mark.sim, pytest.mark.converge_judge]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "run-summary.schema.json").read_text())
SITE_STAGES = {"Preflight the GPU nodes", "Install the planned GPU software stack",
               "Configure the RDMA fabric and the NCCL environment", "Check GPU node health", "Run the GPU diagnostics",
               "Prove the cluster trains"}


def test_site_run_exits_0_with_every_converged_node_ready(converge):
    assert converge.returncode == 0, converge.output[-6000:]
    summary = converge.summary
    jsonschema.validate(summary, SCHEMA)
    assert summary["result"] == "passed" and summary["exit_code"] == 0, summary.get("reason")
    assert summary["ready_nodes"] == list(fleet_lib.CONVERGED) and summary["failed_nodes"] == []
    # The fresh node is outside --limit: the run neither touched nor counted it.
    assert set(summary["nodes"]) == set(fleet_lib.CONVERGED)
    for node in fleet_lib.CONVERGED:
        record = summary["nodes"][node]
        assert record["status"] == "passed", (node, record)
        assert SITE_STAGES <= set(record["stages"]), (node, sorted(record["stages"]))
        assert not [f for f in record["findings"] if f["severity"] == "fail"], record["findings"]
        assert record["versions"]["torch"] == "2.13.0+cpu" and record["versions"]["driver"], record["versions"]
    # Not about bandwidth: the converge skipped that stage (its fault test judges it).
    assert not any(stage.startswith("Find slow nodes") for stage in summary["nodes"]["node1"]["stages"])


def test_stack_json_records_the_plan_and_what_is_installed(converge):
    stack = json.loads((converge.artifacts / "reports" / "stack.json").read_text())
    assert stack["failed_nodes"] == []
    records = {n["node"]: n for n in stack["nodes"]}
    assert sorted(records) == list(fleet_lib.CONVERGED)
    for node, record in records.items():
        plan, installed = record["plan"], record["installed"]
        assert installed["driver"] and installed["driver_loaded"] == installed["driver"], (node, installed)
        assert installed["driver"].split(".")[0] == plan["driver_branch"], (node, record)
        assert plan["cuda_version"] in installed["cuda_toolkits"] and installed["cuda_default"] == plan["cuda_version"]
        assert installed["nccl"] == plan["nccl"] and installed["torch"]["version"] == "2.13.0+cpu"
        # The first converge rebooted into the new driver (reboot allowed): nothing is still owed.
        assert record["reboot_required"] is False and record["reboot_reasons"] == []


def test_every_stage_wrote_its_reports_and_the_smoke_job_says_gloo(converge):
    reports = converge.artifacts / "reports"
    names = {p.name for p in reports.iterdir()}
    assert {"preflight.json", "preflight.md", "plan.json", "stack.json", "health.json", "smoke.json",
            "smoke.junit.xml", "smoke.md", "smoke_busbw.svg"} <= names, sorted(names)
    assert json.loads((reports / "preflight.json").read_text())["passed"] is True
    health = json.loads((reports / "health.json").read_text())
    assert health["nodes_failed"] == [] and sorted(health["nodes"]) == list(fleet_lib.CONVERGED)
    smoke = json.loads((reports / "smoke.json").read_text())
    # A CPU run is never reported as NCCL.
    assert smoke["backend"] == "gloo" and smoke["nccl"] is None and smoke["verdict"]["passed"]
    assert converge.summary["smoke"]["passed"] is True and converge.summary["smoke"]["backend"] == "gloo"
    assert Path(converge.summary["artifacts"]["events"]).is_dir()
    # The passing job became the cluster's baseline (the regression test beats it).
    assert smoke["baseline"]["stored"] and Path(smoke["baseline"]["file"]).name == fleet_lib.SMOKE_BASELINE
    assert (converge.baselines / fleet_lib.SMOKE_BASELINE).is_file()
    # MFU on a CPU run: the model's TFLOPS are kept, with no GPU datasheet to hold them to (and never a value).
    mfu = smoke["training"]["mfu"]
    assert mfu["value"] is None and mfu["model_tflops"] > 0 and "a CPU run (gloo)" in mfu["reason"], mfu


def test_the_benchmark_steps_label_cpu_figures_and_say_what_they_did_not_check(converge):
    """torch on these nodes has no CUDA: the GEMM and memory figures are the CPU's, labelled, compared with
    no GPU datasheet; nccl-tests is not installed and no build was asked for: said, never a pass."""
    reports = converge.artifacts / "reports"
    compute = json.loads((reports / "compute.json").read_text())
    assert compute["status"] == "not_checked" and compute["gpus"] == [] and compute["findings"] == []
    assert sorted(c["node"] for c in compute["cpus"]) == list(fleet_lib.CONVERGED)
    assert all(c["device"] == "cpu" and c["gemm"]["fp32"]["tflops"] > 0 and c["gemm"]["fp32"]["peak_tflops"] is None
               and c["memory"]["gbps"] > 0 for c in compute["cpus"]), compute["cpus"]
    # Each node: its CPU figures compared with no GPU datasheet, and its 8 GPUs' count said to be unchecked (torch
    # sees none of the GPUs gpu_info lists): neither is a pass.
    per_node = {}
    for entry in compute["not_checked"]:
        if entry["check"] == "per-GPU compute and memory":
            per_node.setdefault(entry["node"], []).append(entry["reason"])
    assert sorted(per_node) == list(fleet_lib.CONVERGED), compute["not_checked"]
    for reasons in per_node.values():
        assert any("not compared with a GPU datasheet" in r for r in reasons), reasons
        assert any(r.startswith("GPU count: not checked: torch saw none of the 8 GPU(s)") for r in reasons), reasons
    nccl = json.loads((reports / "nccl_tests.json").read_text())
    assert nccl["status"] == "not_checked" and nccl["findings"] == [], nccl
    assert any("nccl-tests is not installed" in n["reason"] for n in nccl["not_checked"]), nccl["not_checked"]
