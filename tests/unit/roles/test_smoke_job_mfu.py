"""The smoke job reports its model's FLOPs, and the report turns them into MFU (CPU run: said, not computed).

Runs the real job on this machine (torchrun --standalone, one process, gloo)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_report as sr

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"

pytestmark = pytest.mark.torch


def test_the_job_reports_its_model_flops_and_the_cpu_report_says_why_there_is_no_mfu(tmp_path):
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed in this venv")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result_file = tmp_path / "result.json"
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", GPUFLEET_NODE_NAME="local")
    proc = subprocess.run([str(TORCHRUN), "--standalone", "--nproc-per-node", "1", "--rdzv-endpoint", "127.0.0.1:%d" % port,
                           "--log-dir", str(tmp_path / "torchelastic"),  # not a new /tmp/torchelastic_* per run
                           str(JOB), "job", "--result-file", str(result_file), "--backend", "gloo", "--max-bytes", "65536",
                           "--warmup", "1", "--iters", "2", "--steps", "20"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(result_file.read_text())
    training = result["training"]
    assert training["train_flops_per_sample"] == 6 * (64 * 256 + 256 * 256 + 256 * 10)
    assert training["dtype"] == "fp32" and training["samples_per_s"] > 0
    mfu = sr.model_flops_utilization(training, None, "gloo", 1)
    assert mfu["value"] is None and mfu["reason"].startswith("a CPU run (gloo)")
    assert mfu["model_tflops"] == pytest.approx(training["train_flops_per_sample"] * training["samples_per_s"] / 1e12)
