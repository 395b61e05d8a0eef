"""The smoke_report action through ansible-playbook: two nodes' records in hostvars, judged on the
controller. Checks the wiring the module_utils tests cannot: the floor comes from every node's own
``rdma_gbps`` (not the judging host's), and the opt-outs arrive typed from ``-e`` strings.

The node records reuse the launcher results built in test_smoke_report.py (the same shapes the
job prints), with NCCL's INFO lines from its fixtures there.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[4]
VENV_BIN = _REPO / ".venv" / "bin"
_SPEC = importlib.util.spec_from_file_location(
    "smoke_report_cases", _REPO / "tests" / "unit" / "plugins" / "module_utils" / "test_smoke_report.py")
cases = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cases)

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __smoke_test_node: "{{ records[inventory_hostname] }}"
    - gpufleet.cluster.smoke_report:
        cluster: actc
        hosts: "{{ ansible_play_hosts_all }}"
        backend: nccl
        report_dir: "%(out)s/reports"
        baseline_dir: "%(out)s/baselines"
        allow_no_busbw_floor: "{{ allow_floorless | default(false) }}"
        thresholds: {min_loss_drop: 0.1}
      register: verdict
      run_once: true
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ verdict | to_json }}"
        dest: "%(out)s/verdict.json"
        mode: "0644"
      run_once: true
"""


def records(rdma):
    hosts = ["n1", "n2"]
    res = cases._result(hosts, nproc=8, backend="nccl", gbps=400.0)
    outs = cases._outputs(hosts, res, nccl_lines={h: cases.NCCL_IB.splitlines() for h in hosts})
    nodes = cases._nodes(hosts, nproc=8, gpus=8)
    out = {}
    for host in hosts:
        out[host] = dict(nodes[host], ready=True, rdma_gbps=rdma[host],
                         run={"rc": 0, "stdout": json.dumps(outs[host]), "stderr": ""})
    return out


def judge(tmp_path, rdma, *extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"hosts": {"n1": local, "n2": local}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY % {"out": tmp_path})
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play),
                           "-e", json.dumps({"records": records(rdma)})] + list(extra),
                          cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert (tmp_path / "verdict.json").exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    report = json.loads((tmp_path / "reports" / "smoke.json").read_text())
    return verdict, report


def test_floor_from_the_slowest_node_not_the_judge(tmp_path):
    """n1 runs the judgement (run_once) with 3200 Gb/s up; n2 has only 800: the floor follows n2."""
    _verdict, report = judge(tmp_path, {"n1": 3200, "n2": 800})
    assert report["thresholds"]["min_busbw_gbps"]["value"] == pytest.approx(0.75 * 800 / 8)


def test_node_without_rdma_leaves_no_floor_and_fails_unless_allowed_by_name(tmp_path):
    verdict, report = judge(tmp_path / "strict", {"n1": 3200, "n2": None})
    assert verdict["failed"] is True and verdict["passed"] is False
    assert any("no active RDMA port on n2" in r for r in verdict["reasons"])
    verdict, report = judge(tmp_path / "allowed", {"n1": 3200, "n2": None}, "-e", "allow_floorless=true")
    statuses = {c["name"]: c["status"] for c in report["verdict"]["checks"]}
    assert statuses["busbw_gbps"] == "skip", report["verdict"]["reasons"]


CASES_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __smoke_test_node: "{{ records[inventory_hostname] }}"
    - gpufleet.cluster.smoke_report:
        cluster: "{{ item }}"
        hosts: "{{ ansible_play_hosts_all }}"
        backend: nccl
        report_dir: "%(out)s/reports/{{ item }}"
        baseline_dir: "%(out)s/baselines"
        thresholds: {min_loss_drop: 0.1}
      loop: "{{ cases }}"
      register: verdicts
      run_once: true
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ verdicts.results | to_json }}"
        dest: "%(out)s/verdicts.json"
        mode: "0644"
      run_once: true
"""


def test_broken_baselines_fail_with_their_reason_and_never_crash_the_action(tmp_path):
    """Issue 25 F11: every broken baseline of the module_utils table, plus a file that is not JSON,
    read by the action itself (one play, one cluster name per case); a good one as the control."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_report as sr, smoke_verdict as sv
    good_report = cases._baseline_case_report()
    files = {name: json.dumps(spoil(sv.make_baseline(good_report)))
             for name, (spoil, _needle) in cases.BROKEN_BASELINES.items()}
    files["not_json"] = "{ this is not json"
    files["json_null"] = "null"
    files["good"] = json.dumps(sv.make_baseline(good_report))
    (tmp_path / "baselines").mkdir(parents=True)
    for name, text in files.items():
        (tmp_path / "baselines" / sr.baseline_filename(name, good_report["hardware_key"])).write_text(text)
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"hosts": {"n1": local, "n2": local}}}))
    play = tmp_path / "play.yml"
    play.write_text(CASES_PLAY % {"out": tmp_path})
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    extra = {"records": records({"n1": 3200, "n2": 3200}), "cases": sorted(files)}
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play), "-e", json.dumps(extra)],
                          cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    assert (tmp_path / "verdicts.json").exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    results = {r["item"]: r for r in json.loads((tmp_path / "verdicts.json").read_text())}
    assert sorted(results) == sorted(files)
    for name, result in results.items():
        # A crash reads "Unexpected failure during module execution" with a traceback.
        assert result["msg"].startswith("smoke test "), (name, result["msg"], result.get("exception"))
        report = json.loads((tmp_path / "reports" / name / "smoke.json").read_text())
        status = {c["name"]: c["status"] for c in report["verdict"]["checks"]}
        if name == "good":
            assert result["passed"] is True and status["baseline"] == "pass", result.get("reasons")
            continue
        assert result["passed"] is False and result["failed"] is True, name
        assert status["baseline"] == "fail", (name, status)
        (reason,) = [r for r in result["reasons"] if r.startswith("baseline:")]
        needle = {"not_json": "cannot read", "json_null": "holds JSON null, need an object"}.get(name) \
            or cases.BROKEN_BASELINES[name][1]
        assert needle in reason, (name, reason)
        assert report["baseline"]["usable"] is False
