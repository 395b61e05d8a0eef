"""The gpu_benchmark role's compute step through ansible-playbook on this machine (connection local).

On the CPU (this machine has no GPU) it runs the collection's microbenchmark with this venv's torch and
reports CPU figures, labelled, not compared with any GPU datasheet. With the simulator's stand-in as the
benchmark command (real published H100 figures, GPU 0 slowed by the gpu-slow fault) it names the slow
GPU against its datasheet and the node's other GPUs, writes compute.json, and fails the node.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402

PLAY = """
- name: The compute step on this machine
  hosts: all
  gather_facts: false
  tasks:
    - name: Measure each GPU's compute and memory
      ansible.builtin.import_role:
        name: gpufleet.cluster.gpu_benchmark
        tasks_from: compute.yml
"""


def sim_node(tmp_path, faults):
    """A simulated HGX H100 node's tree as gfsim writes it, and the environment its stand-ins read."""
    merged = tmp_path / "nodes" / "node1" / "merged"
    (merged / "etc").mkdir(parents=True)
    (merged / "etc/hosts").write_text("127.0.0.1\tnode1\n")
    hardware.write_node_hardware(merged, "node1", hardware.node_hardware("hgx-h100", {}), faults)
    etc = merged / hardware.NODE_ETC
    (etc / "node.json").write_text((etc / "node.json").read_text().replace('"/etc/gpufleet-sim', '"%s' % etc))
    drivers = tmp_path / "driver"
    drivers.mkdir()
    (drivers / "kernel_module").write_text("535.183.01 proprietary\n")
    (drivers / "userspace_version").write_text("535.183.01\n")
    return merged, dict(os.environ, GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_DRIVER_DIR=str(drivers))


def run_compute(tmp_path, *extra, env=None):
    (tmp_path / "compute.yml").write_text(PLAY)
    (tmp_path / "hosts.ini").write_text("node1 ansible_connection=local\n")
    env = dict(env or os.environ, ANSIBLE_NOCOLOR="1", PATH="%s%s%s" % (BIN, os.pathsep, (env or os.environ)["PATH"]))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "compute.yml"),
           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "gpu_benchmark_venv=%s" % BIN.parent,
           "-e", "gpu_benchmark_work_dir=%s" % (tmp_path / "work"), "-e", "gpufleet_report_dir=%s" % (tmp_path / "reports"),
           "-e", "gpu_benchmark_iters=2"] + list(extra)
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    report = tmp_path / "reports" / "compute.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


@pytest.mark.torch
def test_a_cpu_node_reports_cpu_figures_and_says_so(tmp_path):
    proc, report = run_compute(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert report["gpus"] == [] and len(report["cpus"]) == 1
    cpu = report["cpus"][0]
    assert cpu["device"] == "cpu" and cpu["gemm"]["fp32"]["tflops"] > 0 and cpu["memory"]["gbps"] > 0
    assert cpu["gemm"]["fp32"]["peak_tflops"] is None and cpu["model_key"] is None
    assert report["findings"] == [] and report["status"] == "not_checked"
    assert any("CPU figures" in n["reason"] and "not compared with a GPU datasheet" in n["reason"]
               for n in report["not_checked"])
    assert "CPU (" in proc.stdout


def test_a_slow_gpu_is_named_against_its_datasheet_and_the_other_gpus(tmp_path):
    merged, env = sim_node(tmp_path, ["gpu-slow"])
    standin = REPO / "tests" / "sim" / "standins" / "gpufleet_microbench"
    proc, report = run_compute(tmp_path, "-e", json.dumps({"gpu_benchmark_compute_command": [str(standin)]}), env=env)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert len(report["gpus"]) == 8 and report["cpus"] == []
    gpu1 = report["gpus"][1]
    assert gpu1["model_key"] == "h100-sxm5-80gb" and gpu1["gemm"]["bf16"] == {
        "tflops": 794.5, "peak_tflops": 989.5, "efficiency": 0.8029}
    assert gpu1["memory"] == {"gbps": 2540.0, "peak_gbps": 3350.0, "efficiency": 0.7582}
    named = sorted((f["code"], f["gpu_index"], f["metric"]) for f in report["findings"])
    assert named == [("GPU_GEMM_SLOW", 0, "bf16"), ("GPU_GEMM_SLOW", 0, "fp8"), ("GPU_MEMORY_SLOW", 0, "memory")]
    assert all(f["node"] == "node1" and f["severity"] == "fail" for f in report["findings"])
    assert "of the datasheet's 989.5 TFLOPS" in [f for f in report["findings"] if f["metric"] == "bf16"][0]["message"]
    # The stand-in has no published fp16 figure: said, not passed.
    assert any(n["check"] == "fp16 GEMM" for n in report["not_checked"])
    assert "GPU 0 (NVIDIA H100 80GB HBM3) bf16 GEMM: 317.8 TFLOPS" in proc.stdout


def test_a_stored_node_baseline_names_the_node_that_fell_behind_its_own_history(tmp_path):
    merged, env = sim_node(tmp_path, [])
    etc = merged / hardware.NODE_ETC
    command = json.dumps({"gpu_benchmark_compute_command": [str(REPO / "tests" / "sim" / "standins" / "gpufleet_microbench")]})
    baselines = tmp_path / "baselines"
    proc, report = run_compute(tmp_path, "-e", command, "-e", "gpu_benchmark_baseline_dir=%s" % baselines,
                               "-e", "gpu_benchmark_store_baseline=true", env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    stored = json.loads((baselines / "nodes" / "node-gpufleet--node1--compute.json").read_text())
    assert stored["hardware_key"] == "h100-sxm5-80gb-x8" and stored["metrics"]["gpu0.gemm_bf16_tflops"] == 794.5
    assert report["baseline"]["stored"] == [str(baselines / "nodes" / "node-gpufleet--node1--compute.json")]
    # The same node later, GPU 0 slowed: named against the cluster and against its own history.
    hardware.set_faults(merged, ["gpu-slow"])
    (etc / "node.json").write_text((etc / "node.json").read_text().replace('"/etc/gpufleet-sim', '"%s' % etc))
    proc, report = run_compute(tmp_path, "-e", command, "-e", "gpu_benchmark_baseline_dir=%s" % baselines, env=env)
    assert proc.returncode == 2
    regressed = [f for f in report["findings"] if f["code"] == "NODE_REGRESSED"]
    assert len(regressed) == 1 and regressed[0]["node"] == "node1" and regressed[0]["kind"] == "compute"
    assert set(regressed[0]["value"]) == {"gpu0.gemm_bf16_tflops", "gpu0.gemm_fp8_tflops", "gpu0.copy_gbps"}


def test_a_gpu_that_printed_no_figure_fails_its_node(tmp_path):
    # gpu-missing: the driver (and so the stand-in) lists 7 of the node's 8 GPUs; the inventory expects 8.
    merged, env = sim_node(tmp_path, ["gpu-missing"])
    command = json.dumps({"gpu_benchmark_compute_command": [str(REPO / "tests" / "sim" / "standins" / "gpufleet_microbench")]})
    proc, report = run_compute(tmp_path, "-e", command, "-e", "gpufleet_expected_gpu_count=8", env=env)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert len(report["gpus"]) == 7
    assert [(f["code"], f["gpu_index"], f["severity"]) for f in report["findings"]] == [("FIGURE_MISSING", 7, "fail")]
    assert "GPU 7 printed no figure (torch measured 7 GPU(s), 8 expected)" in report["findings"][0]["message"]


def test_a_stack_planned_without_pytorch_is_a_configuration_conflict_named_before_anything_runs(tmp_path):
    """torch: none (issue 34): the microbenchmark needs PyTorch; the refusal carries a rule code gpufleet reads as
    a configuration error (exit 2), and nothing is copied or measured."""
    proc, report = run_compute(tmp_path, "-e", json.dumps({"gpufleet_stack_request": {"cuda": "12.2", "torch": None}}))
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "[BENCHMARK_NEEDS_TORCH] the GEMM and memory benchmark runs on PyTorch" in " ".join(proc.stdout.split())
    assert report is None
