"""A hung command fails its own node, naming the command and the limit, while the other nodes finish.

Two nodes run the slurm_drain role for real here (connection local), each with its own stand-in
scontrol: one answers, the other never does (a slurmctld that does not reply). The hung node must
fail at the task that names scontrol, with the deadline it was given; the other node finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PLAY = """
- hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.cluster.slurm_drain
      vars:
        slurm_drain_enabled: true
"""


def node(root: Path, hang: bool) -> dict:
    root.mkdir()
    scontrol = root / "scontrol"
    body = (f'echo $$ > "{root}/pid"\nexec sleep 300\n' if hang
            else 'echo "NodeName=$3 Arch=x86_64 State=IDLE ThreadsPerCore=2"\n')
    scontrol.write_text("#!/bin/sh\n" + body)
    scontrol.chmod(0o755)
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "slurm_drain_scontrol": str(scontrol), "slurm_drain_state_dir": str(root / "state"),
            "slurm_drain_node_name": root.name}


def test_a_hung_scontrol_fails_its_node_with_the_command_and_the_limit_and_the_other_node_finishes(tmp_path):
    hosts = {"gpu-a01": node(tmp_path / "gpu-a01", hang=False), "gpu-a02": node(tmp_path / "gpu-a02", hang=True)}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    try:
        proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(play),
                               "-e", json.dumps({"slurm_drain_command_timeout": 2})],
                              capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)
    finally:
        pid_file = tmp_path / "gpu-a02" / "pid"
        if pid_file.exists():  # a task timeout abandons the command; the test ends what it started
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    task = out.split("TASK [gpufleet.cluster.slurm_drain : Read the node's state in Slurm (scontrol show node)]")[1]
    task = task.split("TASK [")[0]
    assert "ok: [gpu-a01]" in task, out[-4000:]
    assert "fatal: [gpu-a02]" in task and "Timed out after 2 second(s)" in task, task
    recap = out.split("PLAY RECAP")[1]
    assert " failed=0 " in next(line for line in recap.splitlines() if line.startswith("gpu-a01")), recap
    assert " failed=1 " in next(line for line in recap.splitlines() if line.startswith("gpu-a02")), recap
