"""molecule default's verify playbook, run as a playbook (not copied) against the converged fleet.

It asserts what role users rely on after `site.yml`: held packages at the plan's versions, the driver
answering, CUDA and torch, no pending reboot, the stack fact, /etc/nccl.conf from the Active IB ports,
ECC on, health.json passing every node, the smoke verdict passed over gloo, and the fresh node bare.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from molecule_scenarios import MOLECULE
from simharness import recap

pytestmark = pytest.mark.sim


def test_molecule_default_verify_passes_on_the_converged_fleet(fleet, tmp_path):
    config = yaml.safe_load((MOLECULE / "default" / "molecule.yml").read_text())
    expect = config["provisioner"]["inventory"]["group_vars"]["all"]["molecule_expect"]
    extra = tmp_path / "expect.json"
    extra.write_text(json.dumps({"molecule_expect": expect}))
    run = fleet.playbook(MOLECULE / "default" / "verify.yml", "-e", f"@{extra}",
                         env={"GPUFLEET_REPORT_DIR": str(fleet.converge.artifacts / "reports")})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    counts = recap(out)
    # Every node was verified: the converged ones and the fresh one, and the controller's reports.
    assert {"node1", "node2", "node3", "node4", "localhost"} <= set(counts), out[-3000:]
    assert all(c["failed"] == 0 for c in counts.values()), out[-6000:]
    assert Path(fleet.converge.artifacts / "reports" / "smoke.json").exists()
