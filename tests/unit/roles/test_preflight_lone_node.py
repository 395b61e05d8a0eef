"""A node checked alone (--limit, a one-node cluster) is still held to the expected GPU count, or the report says
its GPU count was not checked (issue 35 N17). The play runs on this machine (localhost, no GPU)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")


def run_preflight(tmp_path, **extra):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"gpu_nodes": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    report_dir = tmp_path / "reports"
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "playbooks/preflight.yml",
         "-e", json.dumps(dict({"gpufleet_report_dir": str(report_dir), "preflight_report_dir": str(report_dir),
                                "preflight_mode": "warn", "preflight_tool_timeout": "20"}, **extra))],
        cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    path = report_dir / "preflight.json"
    assert path.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(path.read_text())


def _findings(report, code):
    found = report.get("findings") or []
    return [f for f in found if f["code"] == code]


def test_a_lone_node_without_an_expected_count_is_reported_not_checked(tmp_path):
    report = run_preflight(tmp_path)
    (finding,) = _findings(report, "HOMOGENEITY_NOT_CHECKED")
    assert finding["severity"] == "warn" and "GPU count: not checked (one node)" in finding["message"]


def test_a_lone_node_is_held_to_the_inventory_gpu_count(tmp_path):
    report = run_preflight(tmp_path, gpufleet_expected_gpu_count=8)
    assert _findings(report, "HOMOGENEITY_NOT_CHECKED") == []
    (finding,) = [f for f in _findings(report, "HOMOGENEITY_OUTLIER") if "gpu_count" in f["message"]]
    assert finding["severity"] == "fail" and finding["threshold"] == 8 and "gpufleet_expected_gpu_count" in finding["message"]
