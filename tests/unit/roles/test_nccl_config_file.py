"""nccl_config writes /etc/nccl.conf one line per setting, and keeps an operator's file it replaces.

The role runs for real here (connection local) against an empty InfiniBand and PCI tree (the socket
fallback) and a scratch nccl_config_path. A line break in an input would add a setting of its own
(NCCL_NET_PLUGIN names a library NCCL loads into every job): such inputs are refused, naming the
variable, before anything is written. A file gpufleet did not write is backed up and named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
OPERATOR_FILE = "# tuned by hand for the A/B test, do not touch\nNCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n"


def run_role(tmp_path: Path, **role_vars) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: gpufleet.cluster.nccl_config\n")
    (tmp_path / "ib").mkdir(exist_ok=True)
    (tmp_path / "pci").mkdir(exist_ok=True)
    extra = {"nccl_config_path": str(tmp_path / "nccl.conf"), "nccl_config_ib_sysfs_path": str(tmp_path / "ib"),
             "nccl_config_pci_sysfs_path": str(tmp_path / "pci"), "nccl_config_socket_ifname": "eth0",
             "ansible_python_interpreter": sys.executable, **role_vars}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
                           "-e", json.dumps(extra)], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False, timeout=600)
    proc.out = " ".join((proc.stdout + proc.stderr).split())
    return proc


def backups(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("nccl.conf.*~"))


@pytest.mark.parametrize("role_vars, named", [
    ({"nccl_config_socket_ifname": "eth0\nNCCL_NET_PLUGIN=/tmp/x.so"}, 'nccl_config_socket_ifname="eth0\\nNCCL_NET_PLUGIN=/tmp/x.so"'),
    ({"nccl_config_socket_ifname": "eth0\rNCCL_NET_PLUGIN=/tmp/x.so"}, "nccl_config_socket_ifname="),
    ({"nccl_config_socket_ifname": "eth0=x"}, "nccl_config_socket_ifname="),
    ({"nccl_config_env_overrides": {"NCCL_DEBUG": "INFO\nNCCL_NET_PLUGIN=/tmp/x.so"}}, 'nccl_config_env_overrides has ["NCCL_DEBUG"]'),
    ({"nccl_config_env_overrides": {"NCCL_NET_PLUGIN=/tmp/x.so\nNCCL_DEBUG": "INFO"}}, "nccl_config_env_overrides has"),
    ({"nccl_config_ib_hcas": ["mlx5_0\nNCCL_NET_PLUGIN=/tmp/x.so"]}, "nccl_config_ib_hcas holds"),
])
def test_an_input_that_would_add_a_line_is_refused_naming_the_variable(tmp_path, role_vars, named):
    conf = tmp_path / "nccl.conf"
    conf.write_text(OPERATOR_FILE)
    result = run_role(tmp_path, **role_vars)
    assert result.returncode != 0
    assert named in result.out and "nothing was written" in result.out, result.out[-3000:]
    assert conf.read_text() == OPERATOR_FILE and not backups(tmp_path)


def test_an_operator_file_is_backed_up_and_named_and_a_second_run_changes_nothing(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text(OPERATOR_FILE)
    first = run_role(tmp_path, nccl_config_env_overrides={"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_DEBUG": "WARN"})
    assert first.returncode == 0, first.out[-3000:]
    saved = backups(tmp_path)
    assert len(saved) == 1 and saved[0].read_text() == OPERATOR_FILE
    assert (f"WARNING localhost: {conf} was not written by gpufleet" in first.out
            and f"it was replaced and kept as {saved[0]}" in first.out), first.out[-3000:]
    lines = conf.read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "NCCL_DEBUG=WARN", "NCCL_IB_DISABLE=1", "NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=eth0"]

    second = run_role(tmp_path, nccl_config_env_overrides={"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_DEBUG": "WARN"})
    assert second.returncode == 0 and "changed=0" in second.out, second.out[-3000:]
    assert "was not written by gpufleet" not in second.out and len(backups(tmp_path)) == 1
