"""The gpu_health role on this machine (no GPU, no HCA) with every knob given as ``-e name=value``.

``-e`` values are strings; ansible-core 2.19 refuses a string as a conditional ("Conditional
result ... derived from value of type 'str'") and the module would compare "50000" with a
number. The role types them (``| bool`` / ``| int``) and the module's argument spec does too.
It also checks that validate is read-only by default: no nvidia-smi -e / -pm, no reboot request.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[3]
VENV_BIN = _REPO / ".venv" / "bin"

PLAY = """
- name: Health on the controller itself
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gpufleet.cluster.gpu_health
"""

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")


def run_play(tmp_path, *extra):
    play = tmp_path / "health.yml"
    play.write_text(PLAY)
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(play),
         "-e", "ansible_python_interpreter=%s" % sys.executable,
         "-e", "gpu_health_report_dir=%s" % (tmp_path / "reports"),
         "-e", "gpu_health_reboot_request_dir=%s" % (tmp_path / "reboot.d")] + list(extra),
        cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=300, check=False)


def test_string_values_from_extra_vars_work_on_ansible_core_2_19(tmp_path):
    proc = run_play(tmp_path,
                    "-e", "gpu_health_ecc_correctable_volatile_max=50000",
                    "-e", "gpu_health_retired_pages_warn=20",
                    "-e", "gpu_health_fail_nodes=false",
                    "-e", "gpu_health_ecc_enable=false",
                    "-e", "gpu_health_persistence_enable=false",
                    "-e", "gpu_health_xid_check=false",
                    "-e", "gpu_health_pcie_check=true",
                    "-e", "gpu_health_tool_timeout=20",
                    "-e", "gpu_health_ib_expected_hca_count=0")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "derived from value of type" not in proc.stdout + proc.stderr
    report = json.loads((tmp_path / "reports" / "health" / "localhost.json").read_text())
    # This build machine has no GPU: the node is judged, and fails, by name.
    assert report["node"] == "localhost" and report["status"] == "fail"
    assert "NO_GPUS_FOUND" in {f["code"] for f in report["findings"]}
    assert not (tmp_path / "reboot.d").exists()


def test_fail_nodes_given_as_a_string_still_fails_the_node(tmp_path):
    proc = run_play(tmp_path, "-e", "gpu_health_fail_nodes=true", "-e", "gpu_health_xid_check=no")
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "Fail the node on fail-level findings" in proc.stdout and "NO_GPUS_FOUND" in proc.stdout
