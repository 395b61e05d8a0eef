"""preflight.json names the nodes it could not check, and does not pass then.

The play runs on this machine (localhost, local connection) plus ``ghost``, an inventory host
whose SSH port nothing listens on, so Ansible marks it unreachable at its first task.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[3]
VENV_BIN = _REPO / ".venv" / "bin"

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")


def run_preflight(tmp_path, hosts):
    inventory = tmp_path / "hosts.yml"
    entries = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    if "ghost" in hosts:
        # Port 9 (discard) has no listener here: connection refused, unreachable at once.
        entries["ghost"] = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh",
                            "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"}
    inventory.write_text(json.dumps({"gpu_nodes": {"hosts": entries}}))
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    report_dir = tmp_path / "reports"
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "playbooks/preflight.yml",
         "-e", json.dumps({"gpufleet_report_dir": str(report_dir), "preflight_report_dir": str(report_dir),
                           "preflight_mode": "warn", "preflight_tool_timeout": "20"})],
        cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    path = report_dir / "preflight.json"
    assert path.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads(path.read_text()), (report_dir / "preflight.md").read_text()


def test_unreachable_node_is_listed_and_the_report_does_not_pass(tmp_path):
    proc, report, markdown = run_preflight(tmp_path, ["localhost", "ghost"])
    assert "UNREACHABLE" in proc.stdout
    assert report["nodes_not_checked"] == ["ghost"]
    assert report["node_count_expected"] == 2 and "unreachable" in report["not_checked_reason"]
    assert report["passed"] is False
    assert "## Nodes not checked" in markdown and "- ghost" in markdown


def test_all_nodes_checked_lists_none(tmp_path):
    _proc, report, markdown = run_preflight(tmp_path, ["localhost"])
    assert report["nodes_not_checked"] == [] and report["not_checked_reason"] is None
    assert "Nodes not checked" not in markdown
