"""A second run of the stages that change nodes changes nothing on the converged fleet.

gpu_stack finds every node as recorded after its converge and skips the stack roles on one state probe;
fabric re-runs its roles and reports changed=0. (Drift that must re-run the stack roles is the full
tier's: tests/full/test_gpu_stack.py.)
"""

from __future__ import annotations

import json
import re

import pytest

import fleet as fleet_lib
from simharness import changed_on_nodes, recap

pytestmark = pytest.mark.sim


def _rerun(fleet, playbook, tmp_path):
    run = fleet.playbook(playbook, "--limit", "converged", "-e", json.dumps({"gpufleet_report_dir": str(tmp_path)}))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert set(recap(out)) == set(fleet_lib.CONVERGED), out[-3000:]
    return out


def test_gpu_stack_rerun_changes_nothing_and_skips_the_roles(fleet, tmp_path):
    out = _rerun(fleet, "playbooks/gpu_stack.yml", tmp_path)
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)
    for node in fleet_lib.CONVERGED:
        assert re.search(r"TASK \[Run the stack roles\][^\n]*\n(?:[^\n]*\n)*?skipping: \[" + node + r"\]", out), \
            out[-6000:]
    assert "TASK [gpufleet.cluster.nvidia_driver" not in out.split("PLAY [Find the nodes that need a reboot]")[0]


def test_fabric_rerun_changes_nothing(fleet, tmp_path):
    out = _rerun(fleet, "playbooks/fabric.yml", tmp_path)
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)
