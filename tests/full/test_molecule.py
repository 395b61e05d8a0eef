"""Every molecule scenario's whole sequence, as role users run them (the full tier).

Each scenario brings up and takes down its own simulated cluster (molecule/shared/create.yml,
destroy.yml) on the subnets 10.200.10-19 reserved for them, so it never meets a pytest cluster
(the fast tier's fleet on 10.200.2, the factory's 10.200.20-99).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from molecule_scenarios import scenario_dirs, sim_request
from simharness import REPO_ROOT, simlib

SEQUENCE = ("destroy", "syntax", "create", "converge", "idempotence", "check", "verify")


@pytest.mark.parametrize("scenario", [p.name for p in scenario_dirs()])
def test_scenario_passes_its_whole_sequence_and_leaves_nothing(scenario):
    env = {**os.environ, "NO_COLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    run = subprocess.run([str(REPO_ROOT / "tools" / "molecule.sh"), "test", "-s", scenario], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=1800, check=False, env=env,
                         stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-8000:]
    # Every step ran and succeeded: a sequence that silently lost its idempotence or check step
    # would still exit 0.
    for step in SEQUENCE:
        assert re.search(rf"\[{scenario} > {step}\] Executed: Successful", out), f"step {step} missing\n{out[-4000:]}"
    assert len(re.findall(rf"\[{scenario} > destroy\] Executed: Successful", out)) == 2, out[-4000:]
    assert simlib.leftovers(sim_request(scenario)["name"]) == []
