"""One simulator job at a time: the host-wide lock (gfsim.util.acquire_sim_lock), without a cluster.

A second job waits, saying who holds the lock, and gets it once the first lets go; a child of the
holder (simcluster.py under pytest or molecule) does not wait for its own parent; and no test picks a
subnet in 10.200.10-19, the molecule scenarios' own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SIM_DIR = REPO / "tests" / "sim"
sys.path.insert(0, str(SIM_DIR))

CHILD = """
import sys
sys.path.insert(0, {sim!r})
from gfsim import util
print("trying", flush=True)
fh = util.acquire_sim_lock("second job", say_every_s=0.2)
print("acquired" if fh is not None else "not needed", flush=True)
util.release_sim_lock(fh)
"""


def _child(lock: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD.format(sim=str(SIM_DIR))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GPUFLEET_SIM_LOCK": str(lock), **env})


@pytest.fixture
def util(monkeypatch, tmp_path):
    from gfsim import util as simutil
    monkeypatch.setattr(simutil, "SIM_LOCK", tmp_path / "sim.lock")
    monkeypatch.delenv(simutil.SIM_LOCK_HELD_ENV, raising=False)
    return simutil


def test_a_second_job_waits_naming_the_holder_then_gets_the_lock(util, tmp_path):
    held = util.acquire_sim_lock("first job")
    child = _child(util.SIM_LOCK, GPUFLEET_SIM_LOCK_HELD="")
    try:
        assert child.stdout.readline().strip() == "trying"
        # The child says it waits, and for whom, only after it found the lock taken.
        waiting = child.stderr.readline()
        assert "waiting for the simulator lock" in waiting and "first job" in waiting, waiting
        assert child.poll() is None, "the second job went on while the first held the lock"
    finally:
        util.release_sim_lock(held)
    out, _err = child.communicate(timeout=60)
    assert child.returncode == 0 and out.strip() == "acquired"
    assert util.SIM_LOCK_HELD_ENV not in os.environ


def test_a_child_of_the_holder_does_not_wait_for_its_parent(util):
    held = util.acquire_sim_lock("parent job")
    try:
        assert os.environ[util.SIM_LOCK_HELD_ENV] == str(os.getpid())
        child = _child(util.SIM_LOCK)   # inherits GPUFLEET_SIM_LOCK_HELD, as simcluster.py does
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0 and out.splitlines() == ["trying", "not needed"], err
    finally:
        util.release_sim_lock(held)


def test_no_test_uses_the_molecule_scenarios_subnets():
    """10.200.10-19 belong to molecule/*/molecule.yml; a pytest cluster there would tear one down.
    (Unit tests that use such addresses as data bring no cluster up.)"""
    offenders = []
    for path in [*(REPO / "tests" / "integration").rglob("*.py"), *(REPO / "tests" / "full").rglob("*.py"),
                 REPO / "tests" / "simharness.py"]:
        if path.name == Path(__file__).name:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"10\.200\.1[0-9]\.", line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
