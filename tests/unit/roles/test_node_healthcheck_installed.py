# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The health check as the role installs it, run the way slurmd runs HealthCheckProgram.

fabric.yml installs the role for real (connection local, Slurm mode) into a scratch directory; then the
installed command runs from another directory with no arguments, no PATH and only SLURMD_NODENAME in its
environment (what slurmd gives it; the dcgmi stand-in's own settings aside), so it can use nothing but what
the role installed. scontrol is a stateful stand-in that answers `show node` as Slurm's one-line format.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from test_slurm_drain_role import SCONTROL

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402

FILTER = REPO / "plugins" / "filter" / "module_utils_needed.py"


def install(tmp_path: Path) -> subprocess.CompletedProcess:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node2": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}}}}}}))
    (tmp_path / "slurm.conf").write_text("ClusterName=demo\n")
    (tmp_path / "sbin").mkdir()
    scratch = {"gpufleet_node_healthcheck": True, "node_healthcheck_mode": "slurm", "node_healthcheck_drain": True,
               "node_healthcheck_slurm_conf": str(tmp_path / "slurm.conf"),
               "node_healthcheck_state_dir": str(tmp_path / "state"),
               "node_healthcheck_path": f"{tmp_path / 'bin'}:/usr/bin:/bin",
               "__node_healthcheck_program": str(tmp_path / "sbin" / "gpufleet-healthcheck"),
               "__node_healthcheck_lib_root": str(tmp_path / "lib"),
               "__node_healthcheck_config": str(tmp_path / "etc" / "healthcheck.json")}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "fabric.yml"),
                           "--tags", "node_healthcheck", "-e", json.dumps(scratch)],
                          capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)


def stand_ins(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dcgmi").symlink_to(REPO / "tests" / "sim" / "standins" / "dcgmi")
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    (bin_dir / "state").write_text("IDLE|none\n")


def as_slurmd(tmp_path: Path, faults=()) -> subprocess.CompletedProcess:
    """Runs the installed HealthCheckProgram as slurmd does: no arguments, no PATH, SLURMD_NODENAME."""
    etc = tmp_path / "sim-etc"
    etc.mkdir(exist_ok=True)
    config = {"faults": list(faults), **{f"{k}_capture": str(v) for k, v in hardware.DCGM_CAPTURES.items()}}
    (etc / "node.json").write_text(json.dumps(config))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {"SLURMD_NODENAME": "node2", "GPUFLEET_SIM_ETC": str(etc), "GPUFLEET_SIM_HOSTENGINE": "1"}
    return subprocess.run([str(tmp_path / "sbin" / "gpufleet-healthcheck")], cwd=elsewhere, env=env,
                          capture_output=True, text=True, check=False, timeout=120)


def slurm_state(tmp_path: Path) -> str:
    return (tmp_path / "bin" / "state").read_text().strip()


def test_the_role_installs_every_module_the_program_imports_and_nothing_else(tmp_path):
    result = install(tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    lib = tmp_path / "lib" / "ansible_collections" / "gpufleet" / "cluster" / "plugins" / "module_utils"
    installed = sorted(p.name for p in lib.iterdir())
    # nvlink.py imports health.py, which imports more: the hand-kept list of seven files missed them.
    assert {"health.py", "nvlink.py", "dcgm.py", "slurm.py", "findings.py"} <= set(installed)
    assert installed == sorted(set(installed))
    config = json.loads((tmp_path / "etc" / "healthcheck.json").read_text())
    assert config["budget"] == 45 and config["level"] == 1 and config["drain"] is True
    assert (tmp_path / "slurm.conf").read_text().splitlines()[1] == \
        f"HealthCheckProgram={tmp_path / 'sbin' / 'gpufleet-healthcheck'}"


def test_under_slurmd_a_failing_node_is_drained_as_gpufleet_and_resumed_once_it_passes(tmp_path):
    assert install(tmp_path).returncode == 0
    stand_ins(tmp_path)
    failing = as_slurmd(tmp_path, faults=["gpu-diag-fail"])
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "node2: fail" in failing.stdout
    assert slurm_state(tmp_path) == "IDLE+DRAIN|gpufleet: DCGM_FR_PERSISTENCE_MODE"
    result = json.loads((tmp_path / "state" / "healthcheck.json").read_text())
    assert result["node"] == "node2" and result["status"] == "fail"
    passing = as_slurmd(tmp_path)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert slurm_state(tmp_path) == "IDLE|none"
    assert (tmp_path / "bin" / "calls").read_text().splitlines()[-1] == "update NodeName=node2 State=RESUME"


def test_an_operators_drain_is_never_resumed_nor_replaced(tmp_path):
    assert install(tmp_path).returncode == 0
    stand_ins(tmp_path)
    (tmp_path / "bin" / "state").write_text("IDLE+DRAIN|bad fan, ticket 4411\n")
    assert as_slurmd(tmp_path).returncode == 0
    assert not (tmp_path / "bin" / "calls").exists()  # a passing check with no drain of ours asks Slurm nothing
    assert as_slurmd(tmp_path, faults=["gpu-diag-fail"]).returncode == 1
    assert slurm_state(tmp_path) == "IDLE+DRAIN|bad fan, ticket 4411"
    assert not any(c.startswith("update") for c in (tmp_path / "bin" / "calls").read_text().splitlines())


def test_the_filter_follows_imports_transitively(tmp_path):
    sys.path.insert(0, str(FILTER.parent))
    from module_utils_needed import module_utils_needed  # noqa: E402 - the filter file itself, no Ansible loader
    program = tmp_path / "p.py"
    program.write_text("from ansible_collections.gpufleet.cluster.plugins.module_utils import nvlink\n")
    assert {"nvlink.py", "health.py", "findings.py"} <= set(module_utils_needed(str(program)))
    program.write_text("import json\n")
    assert module_utils_needed(str(program)) == []
