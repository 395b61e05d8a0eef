"""tests/gpu/benchmark_on_gpu.sh on a machine without a GPU: its CPU path (GPUFLEET_ALLOW_CPU=1) runs the same
microbenchmark, nccl-tests step, smoke job and judging code as on the H200 node, and labels every CPU figure.

nccl-tests here is the simulator's stand-in (real H100 logs) on a simulated 8-GPU node, so the parse and the
judge run; the smoke job runs gloo, so nothing is set side by side with NCCL, and the document says why."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "gpu" / "benchmark_on_gpu.sh"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_cpu_path_labels_cpu_figures_and_judges_nccl_tests(tmp_path):
    pytest.importorskip("torch")
    merged = tmp_path / "node" / "merged"
    (merged / "etc").mkdir(parents=True)
    (merged / "etc/hosts").write_text("127.0.0.1\tgpu-node\n")
    hardware.write_node_hardware(merged, "gpu-node", hardware.node_hardware("hgx-h100", {}), [])
    etc = merged / hardware.NODE_ETC
    (etc / "node.json").write_text((etc / "node.json").read_text().replace('"/etc/gpufleet-sim', '"%s' % etc))
    drivers = tmp_path / "driver"
    drivers.mkdir()
    (drivers / "kernel_module").write_text("535.183.01 proprietary\n")
    (drivers / "userspace_version").write_text("535.183.01\n")
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), GPUFLEET_ALLOW_CPU="1", GPUFLEET_GPU_PYTHON=sys.executable,
               SMOKE_STEPS="60", SMOKE_RDZV_PORT="29473", MICROBENCH_ARGS="--iters 2",
               NCCL_TESTS_DIR=str(REPO / "tests" / "sim" / "standins"), NCCL_TESTS_GPUS="8",
               NCCL_TESTS_ARGS="-b 256M -e 1G -f 2", GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_DRIVER_DIR=str(drivers),
               PATH="%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", "")))
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    log = proc.stdout + proc.stderr
    if "the CPU path" not in log:
        pytest.skip("this machine has a GPU: the script took the GPU path")
    assert proc.returncode == 0, log[-4000:]
    doc = json.loads((out / "benchmark.json").read_text())
    assert doc["compute"]["summary"][0].startswith("gpu-node CPU (")
    assert any("CPU figures" in n["reason"] for n in doc["compute"]["not_checked"])
    # The capture's 1 GiB row; no floor, since the CPU path knows no GPU model to look one up for.
    assert doc["nccl_tests"]["busbw_gbps"] == 470.05 and doc["nccl_tests"]["floor_gbps"] is None
    assert doc["smoke"]["backend"] == "gloo" and doc["smoke"]["passed"] is True
    assert doc["smoke"]["mfu"]["value"] is None and doc["smoke"]["mfu"]["reason"].startswith("a CPU run (gloo)")
    assert doc["comparison"]["compared"] is False and "ran gloo" in doc["comparison"]["reason"]
