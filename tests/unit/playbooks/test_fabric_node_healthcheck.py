# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""fabric.yml installs the node health check only when asked (gpufleet_node_healthcheck).

The playbook runs for real here (connection local, tag node_healthcheck, so RDMA and NCCL are left
alone), in Slurm mode with the program, its parsers and slurm.conf pointed into a scratch directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def run_fabric(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}}}}}}))
    (tmp_path / "slurm.conf").write_text("ClusterName=demo\n")
    scratch = {"node_healthcheck_mode": "slurm", "node_healthcheck_slurm_conf": str(tmp_path / "slurm.conf"),
               "__node_healthcheck_program": str(tmp_path / "sbin" / "gpufleet-healthcheck"),
               "__node_healthcheck_lib_root": str(tmp_path / "lib"),
               "__node_healthcheck_config": str(tmp_path / "etc" / "healthcheck.json")}
    (tmp_path / "sbin").mkdir()
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "fabric.yml"),
                           "--tags", "node_healthcheck", "-e", json.dumps(scratch), *extra],
                          capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)


@pytest.mark.parametrize("opt_in", [None, "gpufleet_node_healthcheck=false"])
def test_the_health_check_is_not_installed_unless_asked(tmp_path, opt_in):
    result = run_fabric(tmp_path, *(["-e", opt_in] if opt_in else []))
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "skipping: [node1]" in result.stdout
    assert not (tmp_path / "sbin" / "gpufleet-healthcheck").exists()
    assert (tmp_path / "slurm.conf").read_text() == "ClusterName=demo\n"


def test_asked_for_it_installs_the_program_its_parsers_and_the_slurm_settings(tmp_path):
    result = run_fabric(tmp_path, "-e", "gpufleet_node_healthcheck=true")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert (tmp_path / "sbin" / "gpufleet-healthcheck").stat().st_mode & 0o111
    lib = tmp_path / "lib" / "ansible_collections" / "gpufleet" / "cluster" / "plugins" / "module_utils"
    assert {p.name for p in lib.iterdir()} >= {"slurm.py", "dcgm.py", "nvlink.py", "findings.py", "health.py"}
    assert (tmp_path / "slurm.conf").read_text().splitlines() == [
        "ClusterName=demo", f"HealthCheckProgram={tmp_path / 'sbin' / 'gpufleet-healthcheck'}", "HealthCheckInterval=900"]
