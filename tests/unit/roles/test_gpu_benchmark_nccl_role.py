"""The gpu_benchmark role's nccl-tests step through ansible-playbook on this machine (connection local).

Without nccl-tests (no directory named, no package, no sha256 to build from) the step says so and fails
nothing, also with no node ready for the runs across nodes (the case the fleet's converge is). With the
simulator's stand-ins on a simulated HGX H100 node, the single-node all_reduce replays the real 8x H100
capture and is judged against the smoke job's single-node floor; the gpu-slow fault brings it below.
"""

import json
import os
import subprocess
import sys

from test_gpu_benchmark_compute import BIN, REPO, hardware, sim_node

STANDINS = REPO / "tests" / "sim" / "standins"
PLAY = """
- name: The nccl-tests step on this machine
  hosts: all
  gather_facts: false
  tasks:
    - name: Run nccl-tests and write the report
      ansible.builtin.import_role:
        name: gpufleet.cluster.gpu_benchmark
        tasks_from: nccl_tests.yml
"""


def gpu_node(tmp_path, faults):
    """A simulated HGX H100 node on this machine: its tree, nvidia-smi (the stand-in) first on PATH."""
    merged, env = sim_node(tmp_path, faults)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text('#!/bin/sh\nexec %s %s "$@"\n' % (sys.executable, STANDINS / "nvidia_smi.py"))
    (tools / "nvidia-smi").chmod(0o755)
    env["PATH"] = "%s%s%s" % (tools, os.pathsep, env["PATH"])
    where = {"gpu_benchmark_nccl_tests_path": str(STANDINS),
             "gpu_benchmark_pci_sysfs_path": str(merged / hardware.PCI_TREE)}
    return json.dumps(where), env


def run_nccl(tmp_path, *extra, env=None):
    (tmp_path / "nccl.yml").write_text(PLAY)
    (tmp_path / "hosts.ini").write_text("node1 ansible_connection=local\n")
    env = dict(env or os.environ, ANSIBLE_NOCOLOR="1", PATH="%s%s%s" % (BIN, os.pathsep, (env or os.environ)["PATH"]))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "nccl.yml"),
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-e", "gpufleet_report_dir=%s" % (tmp_path / "reports"),
           "-e", "gpu_benchmark_baseline_dir=%s" % (tmp_path / "baselines"),
           "-e", json.dumps({"gpu_benchmark_nccl_tests_search": [str(tmp_path / "nowhere")],
                             "gpu_benchmark_nccl_tests_build_dir": str(tmp_path / "build")})] + list(extra)
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    report = tmp_path / "reports" / "nccl_tests.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def test_without_nccl_tests_the_step_says_where_to_get_it_and_fails_nothing(tmp_path):
    proc, report = run_nccl(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert report["status"] == "not_checked" and report["findings"] == [], report
    reasons = {n["check"]: n["reason"] for n in report["not_checked"]}
    assert "nccl-tests is not installed in %s" % (tmp_path / "nowhere") in reasons["nccl-tests within the node"]
    assert "gpu_benchmark_nccl_tests_src_sha256" in reasons["nccl-tests within the node"]
    assert reasons["nccl-tests across nodes"].startswith("fewer than two nodes ran nccl-tests within themselves")


def test_the_single_node_run_is_judged_against_the_smoke_jobs_floor(tmp_path):
    where, env = gpu_node(tmp_path, [])
    proc, report = run_nccl(tmp_path, "-e", where, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    (single,) = report["runs"]["single"]
    assert single["nodes"] == ["node1"] and single["nranks"] == 8 and single["problems"] == []
    assert single["floor_gbps"] == 460.0 and single["busbw_gbps"] > single["floor_gbps"], single
    assert report["findings"] == [] and report["runs"]["multi"] is None


def test_a_slow_gpu_brings_the_node_below_the_floor(tmp_path):
    where, env = gpu_node(tmp_path, ["gpu-slow"])
    proc, report = run_nccl(tmp_path, "-e", where, env=env)
    assert proc.returncode == 2, proc.stdout[-4000:]
    (finding,) = report["findings"]
    assert (finding["code"], finding["node"], finding["run"], finding["threshold"]) == (
        "NCCL_TESTS_BUSBW_LOW", "node1", "single-node", 460.0), finding
    assert report["status"] == "fail" and finding["value"] < 460.0 * 0.5
