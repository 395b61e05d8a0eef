"""tests/gpu/run_on_gpu.sh on a machine without a GPU: its CPU path (GPUFLEET_ALLOW_CPU=1) runs the
same launcher and report code as on the H200 node, with gloo, and says so."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "gpu" / "run_on_gpu.sh"

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_cpu_path_writes_reports_and_never_claims_nccl(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, OUT=str(tmp_path), GPUFLEET_ALLOW_CPU="1", GPUFLEET_SKIP_PLAYBOOK="1",
               SMOKE_STEPS="60", SMOKE_RDZV_PORT="29471", GPUFLEET_GPU_PYTHON=sys.executable,
               PATH="%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", "")))
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    log = proc.stdout + proc.stderr
    if "nvidia-smi lists" in log and "running the CPU path" not in log:
        pytest.skip("this machine has a GPU: the script took the GPU path")
    assert proc.returncode == 0, log[-4000:]
    assert "running the CPU path with gloo" in log
    doc = json.loads((tmp_path / "reports" / "smoke.json").read_text())
    assert doc["backend"] == "gloo" and doc["nccl"] is None and doc["world_size"] == 2
    assert doc["verdict"]["passed"], doc["verdict"]["reasons"]
    for name in ("smoke.junit.xml", "smoke.md", "smoke_busbw.svg"):
        assert (tmp_path / "reports" / name).stat().st_size > 200
    assert (tmp_path / "verdict.txt").read_text() == "passed\n"
