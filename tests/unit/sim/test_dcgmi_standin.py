"""The stand-in dcgmi replays the real captures the simulated nodes use, and refuses what was not captured."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm

REPO = Path(__file__).resolve().parents[3]
STANDIN = REPO / "tests" / "sim" / "standins" / "dcgmi"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402


@pytest.fixture
def node_etc(tmp_path):
    def make(faults=()):
        config = {"faults": list(faults)}
        for kind, src in hardware.DCGM_CAPTURES.items():
            config[f"{kind}_capture"] = str(src)
        (tmp_path / "node.json").write_text(json.dumps(config))
        return tmp_path
    return make


def run(etc, *args, hostengine=True):
    env = dict(os.environ, GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_HOSTENGINE="1" if hostengine else "0")
    return subprocess.run([sys.executable, str(STANDIN), *args], capture_output=True, text=True, env=env, check=False)


def test_healthy_node_replays_the_passing_capture(node_etc):
    proc = run(node_etc(), "diag", "-r", "1", "-j")
    assert proc.returncode == 0
    assert proc.stdout == hardware.DCGM_CAPTURES["dcgm_pass"].read_text()
    assert dcgm.evaluate_dcgm(dcgm.parse_dcgm_diag(proc.stdout), "node1", 1, rc=proc.returncode) == []


def test_gpu_diag_fail_replays_the_failing_capture_with_exit_226(node_etc):
    proc = run(node_etc(["gpu-diag-fail"]), "diag", "-r", "1", "-j")
    assert proc.returncode == 226
    findings = dcgm.evaluate_dcgm(dcgm.parse_dcgm_diag(proc.stdout), "node2", 1, rc=proc.returncode)
    assert [f["code"] for f in findings] == ["DCGM_FR_PERSISTENCE_MODE"]


def test_uncaptured_level_text_output_and_missing_hostengine_are_errors(node_etc):
    etc = node_etc()
    assert run(etc, "diag", "-r", "2", "-j").returncode == 2
    assert "only level 1" in run(etc, "diag", "-r", "2", "-j").stderr
    assert run(etc, "diag", "-r", "1").returncode == 2
    assert run(etc, "diag", "-r", "1", "-j", hostengine=False).returncode == 255


def test_fault_is_known_to_the_simulator():
    assert "gpu-diag-fail" in hardware.FAULTS and "link-slow" in hardware.FAULTS
