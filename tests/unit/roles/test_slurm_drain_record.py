# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""slurm_drain keeps the record of a drain it made, so that it can resume that drain later.

The role runs for real (connection local) against a stand-in scontrol that keeps the node's state in
a JSON file and answers `show node` in scontrol's default layout (SchedMD/slurm src/api/node_info.c).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SCONTROL = r"""#!PYTHON
import json, sys
from pathlib import Path
state_file = Path(sys.argv[0]).with_name("node.json")
node = json.loads(state_file.read_text())
with state_file.with_name("calls").open("a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\n")
if sys.argv[1] == "show":
    print("NodeName=%s Arch=x86_64 CoresPerSocket=48\n   State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1" % (sys.argv[3], node["state"]))
    if node["reason"]:
        print("   Reason=%s [root@2026-12-03T08:00:00]" % node["reason"])
elif sys.argv[3] == "State=DRAIN":
    state_file.write_text(json.dumps({"state": node["state"] + "+DRAIN", "reason": sys.argv[4][len("Reason="):]}))
elif sys.argv[3] == "State=RESUME":
    state_file.write_text(json.dumps({"state": node["state"].split("+")[0], "reason": None}))
"""
FAILING = [{"code": "XID_79", "severity": "fail", "node": "gpu-a01", "message": "GPU fell off the bus"}]


def run_role(tmp_path: Path, findings: list) -> dict:
    scontrol = tmp_path / "scontrol"
    if not scontrol.exists():
        scontrol.write_text(SCONTROL.replace("PYTHON", sys.executable))
        scontrol.chmod(0o755)
        (tmp_path / "node.json").write_text(json.dumps({"state": "IDLE", "reason": None}))
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: gpufleet.cluster.slurm_drain\n")
    extra = {"slurm_drain_enabled": True, "slurm_drain_node_name": "gpu-a01", "slurm_drain_scontrol": str(scontrol),
             "slurm_drain_state_dir": str(tmp_path / "state"), "slurm_drain_findings": findings,
             "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
                           "-e", json.dumps(extra)], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads((tmp_path / "node.json").read_text())


def test_a_node_failing_again_after_an_operator_resumed_it_is_resumed_once_healthy(tmp_path):
    record = tmp_path / "state" / "slurm-drained-by-gpufleet"
    assert run_role(tmp_path, FAILING) == {"state": "IDLE+DRAIN", "reason": "gpufleet: XID_79"}
    # The operator resumes the node by hand; gpufleet's record of its drain is now stale.
    (tmp_path / "node.json").write_text(json.dumps({"state": "IDLE", "reason": None}))
    assert run_role(tmp_path, FAILING) == {"state": "IDLE+DRAIN", "reason": "gpufleet: XID_79"}
    assert record.read_text() == "gpufleet: XID_79\n", "the drain this run made is gpufleet's: its record must stay"
    assert run_role(tmp_path, []) == {"state": "IDLE", "reason": None}
    assert not record.exists()
