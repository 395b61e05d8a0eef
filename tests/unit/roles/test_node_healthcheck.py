"""gpufleet-healthcheck judges the stand-in dcgmi's real captures, and drains with slurm_drain's reason."""

import json
import os
import subprocess
import sys
from pathlib import Path

from fixtures_path import FIXTURES

REPO = Path(__file__).resolve().parents[3]
PROGRAM = REPO / "roles" / "node_healthcheck" / "files" / "gpufleet_healthcheck.py"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402


def run(tmp_path, faults=(), drain=False, node="node2", show=""):
    etc = tmp_path / "etc"
    etc.mkdir(exist_ok=True)
    config = {"faults": list(faults)}
    config.update({f"{k}_capture": str(v) for k, v in hardware.DCGM_CAPTURES.items()})
    (etc / "node.json").write_text(json.dumps(config))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "dcgmi").symlink_to(REPO / "tests" / "sim" / "standins" / "dcgmi")
    # scontrol records what it was asked (the drain is the side effect under test); `show` answers `show node`.
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$@" >> "%s"\n%s\n' % (tmp_path / "scontrol.log", show))
    (bin_dir / "scontrol").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", GPUFLEET_LIB=str(REPO / "collections"),
               GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_HOSTENGINE="1")
    args = [sys.executable, str(PROGRAM), "--config", str(tmp_path / "no-config.json"), "--node", node,
            "--state-dir", str(tmp_path / "state")]
    proc = subprocess.run(args + (["--drain"] if drain else []), capture_output=True, text=True, env=env, check=False)
    return proc, json.loads((tmp_path / "state" / "healthcheck.json").read_text())


def test_healthy_node_passes(tmp_path):
    proc, result = run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["status"] == "pass" and result["findings"] == []


def test_failing_diag_exits_1_and_drains_with_the_codes(tmp_path):
    proc, result = run(tmp_path, faults=["gpu-diag-fail"], drain=True)
    assert proc.returncode == 1
    assert [f["code"] for f in result["findings"]] == ["DCGM_FR_PERSISTENCE_MODE"]
    assert "FAIL node2 GPU0 DCGM_FR_PERSISTENCE_MODE" in proc.stdout
    calls = (tmp_path / "scontrol.log").read_text().splitlines()
    assert calls[-1] == "update NodeName=node2 State=DRAIN Reason=gpufleet: DCGM_FR_PERSISTENCE_MODE"
    assert (tmp_path / "state" / "slurm-drained-by-gpufleet").read_text() == "gpufleet: DCGM_FR_PERSISTENCE_MODE\n"


def test_a_node_an_operator_drained_keeps_the_operators_reason(tmp_path):
    """The program reads Slurm with the collection's parser (a real capture: oxygen-04 drained by root)."""
    capture = FIXTURES / "slurm" / "show-node-17.11-4-nodes-gpu-allocated-idle-drain.txt"
    proc, result = run(tmp_path, faults=["gpu-diag-fail"], drain=True, node="oxygen-04",
                       show='[ "$1" = show ] && cat "%s"' % capture)
    assert proc.returncode == 1
    assert (tmp_path / "scontrol.log").read_text().splitlines() == ["show node oxygen-04"]
    assert result["slurm"] == 'oxygen-04 is already drained (reason "memory issues?"); left as it is'
    assert not (tmp_path / "state" / "slurm-drained-by-gpufleet").exists()
