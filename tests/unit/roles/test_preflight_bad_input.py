"""Bad inventory values stop preflight before any node is touched, naming the variable and the value.

The only host is `ghost`, an SSH address nothing listens on: a run that tried to reach it would say
UNREACHABLE. These fail first, in the role's argument validation or in the profile resolution that
runs on the controller.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = REPO / ".venv" / "bin"

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")

GHOST = {"gpu_nodes": {"hosts": {"ghost": {
    "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh",
    "ansible_python_interpreter": "/usr/bin/python3",
    "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/dev/null"}}}}


@pytest.mark.parametrize("extra_vars, needle", [
    ({"preflight_mode": "sloppy"}, "value of preflight_mode must be one of: strict, warn, got: sloppy"),
    ({"preflight_allow_mixed": ["kernal"]}, "preflight_allow_mixed"),
    ({"gpufleet_profile": "nope"}, "[UNKNOWN_PROFILE] gpufleet_profile: unknown profile 'nope'"),
    ({"gpufleet_custom_profiles": {"sim": {"extends": "training", "min_vram_gib": "lots"}}, "gpufleet_profile": "sim"},
     "gpufleet_custom_profiles.sim.min_vram_gib must be a non-negative number"),
])
def test_bad_inventory_values_fail_with_the_variable_name_before_any_node(tmp_path, extra_vars, needle):
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps(GHOST))
    report_dir = tmp_path / "reports"
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}", ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "playbooks/preflight.yml",
                           "-e", json.dumps({**extra_vars, "gpufleet_report_dir": str(report_dir)})],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = " ".join((proc.stdout + proc.stderr).split())   # the YAML callback wraps long messages
    assert proc.returncode != 0
    assert needle in out, out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]   # no node was contacted
    assert not (report_dir / "preflight.json").exists()
