"""The pipeline entry point, run for real through ansible-runner on local-connection hosts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpufleet import cli
from gpufleet.runner import (EXIT_NODES_FAILED, EXIT_PASSED, EXIT_RUN_BROKEN, AnsibleOptions, RunBroken, classify,
                             run_stage)
from gpufleet.summary import SCHEMA_PATH, build_summary, summary_table

PLAY = """
- name: Check the nodes
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Write a health report with a finding for the failing node
      when: fail_here | default(false) | bool
      delegate_to: localhost
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'GPUFLEET_REPORT_DIR') }}/health.json"
        content: '{{ {"nodes": {inventory_hostname: {"findings": [{"code": "ECC_UNCORRECTABLE_VOLATILE",
          "severity": "fail", "node": inventory_hostname, "message": "2 uncorrectable"}]}}} | to_json }}'
        mode: "0644"
    - name: Pass on every node but the one told to fail
      ansible.builtin.assert:
        that: not (fail_here | default(false) | bool)
        fail_msg: "{{ inventory_hostname }} was told to fail"
"""


def _inventory(tmp_path: Path, failing: str | None = None) -> Path:
    hosts = {}
    for name in ("n1", "n2", "n3"):
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        if name == failing:
            hosts[name]["fail_here"] = True
    path = tmp_path / "inventory.json"
    # A JSON file is valid YAML, which the yaml inventory plugin reads.
    path.with_suffix(".yml").write_text(json.dumps({"gpu_nodes": {"hosts": hosts}}))
    return path.with_suffix(".yml")


@pytest.fixture
def playbook(tmp_path):
    path = tmp_path / "play.yml"
    path.write_text(PLAY)
    return path


def _summary(tmp_path, failing=None, playbook=None, limit=None):
    artifacts = tmp_path / "artifacts"
    lines = []

    class Out:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    run = run_stage("validate", _inventory(tmp_path, failing), artifacts, options=AnsibleOptions(limit=limit),
                    out=Out(), playbook=playbook)
    from datetime import datetime, timezone
    return run, build_summary(run, limit, datetime.now(timezone.utc)), "".join(lines)


def test_healthy_run_passes_with_a_complete_summary(tmp_path, playbook):
    run, summary, progress = _summary(tmp_path, playbook=playbook)
    assert classify(run) == (EXIT_PASSED, "all nodes passed")
    jsonschema.validate(summary, json.loads(SCHEMA_PATH.read_text()))
    assert summary["ready_nodes"] == ["n1", "n2", "n3"]
    assert summary["failed_nodes"] == []
    # One progress line per node for the play, with the elapsed time.
    assert sum(1 for line in progress.splitlines() if "Check the nodes" in line) == 3
    assert all(line.startswith("[") and "s]" in line for line in progress.splitlines()
               if not line.startswith(("gpufleet: ", "    ")))  # the settings in force come first
    assert Path(summary["artifacts"]["events"]).is_dir()


def test_a_failing_node_is_named_with_its_findings(tmp_path, playbook):
    run, summary, progress = _summary(tmp_path, failing="n2", playbook=playbook)
    code, reason = classify(run)
    assert code == EXIT_NODES_FAILED
    assert reason == "nodes failed: n2"
    jsonschema.validate(summary, json.loads(SCHEMA_PATH.read_text()))
    assert summary["failed_nodes"] == ["n2"]
    assert summary["ready_nodes"] == ["n1", "n3"]
    node = summary["nodes"]["n2"]
    assert node["stages"]["Check the nodes"]["status"] == "failed"
    assert "n2 was told to fail" in node["stages"]["Check the nodes"]["first_failure"]
    assert [f["code"] for f in node["findings"]] == ["ECC_UNCORRECTABLE_VOLATILE"]
    assert summary["nodes"]["n1"]["findings"] == []
    assert "n2" in summary_table(summary).splitlines()[3]


def test_limit_runs_only_the_selected_nodes(tmp_path, playbook):
    run, summary, _output = _summary(tmp_path, failing="n2", playbook=playbook, limit="n1")
    assert classify(run)[0] == EXIT_PASSED
    assert sorted(summary["nodes"]) == ["n1"]


def test_bad_inventory_breaks_the_run_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yml"
    bad.write_text("gpu_nodes: [unclosed\n")
    rc = cli.main(["run", "validate", "-i", str(bad), "--artifacts", str(tmp_path / "a")])
    assert rc == EXIT_RUN_BROKEN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not be parsed" in err[0] and str(bad) in err[0]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    jsonschema.validate(summary, json.loads(SCHEMA_PATH.read_text()))
    assert summary["result"] == "run_broken"


def test_missing_inventory_and_unknown_stage_break_the_run(tmp_path):
    with pytest.raises(RunBroken, match="does not exist"):
        run_stage("validate", tmp_path / "nope.yml", tmp_path / "a")
    with pytest.raises(RunBroken, match="unknown stage"):
        run_stage("deploy", tmp_path / "nope.yml", tmp_path / "a")


def test_help_documents_exit_codes():
    repo = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-m", "gpufleet", "--help"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(repo)}).stdout
    assert "1 some nodes failed" in out and "2 the run itself broke" in out


def _smoke_run(tmp_path, smoke_doc):
    """A finished run whose smoke verdict task failed on node1, the host that ran it once."""
    from gpufleet.runner import EventTracker, PlayTally, StageRun
    from gpufleet.summary import SMOKE_VERDICT_TASK

    reports = tmp_path / "reports"
    reports.mkdir(parents=True)
    (reports / "smoke.json").write_text(json.dumps(smoke_doc))
    tracker = EventTracker(out=open(os.devnull, "w"))
    tracker.plays = ["Prove the cluster trains"]
    verdict = PlayTally(ok=5, failed=1, first_failure=f"{SMOKE_VERDICT_TASK}: smoke test FAILED",
                        failed_tasks=[SMOKE_VERDICT_TASK])
    tracker.tallies = {"Prove the cluster trains": {"node1": verdict, "node2": PlayTally(ok=5), "node3": PlayTally(ok=5)}}
    tracker.hosts_seen = ["node1", "node2", "node3"]
    tracker.finished_playbook = True  # Ansible reached its recap
    return StageRun(stage="smoke", inventory=tmp_path / "inv.yml", artifacts=tmp_path, rc=2, tracker=tracker,
                    hosts=["node1", "node2", "node3"], duration_s=1.0, runner_status="failed")


def _smoke_doc(statuses, missing=()):
    return {"hosts_expected": list(statuses), "missing_nodes": list(missing), "backend": "gloo",
            "nodes": [{"name": n, "status": s} for n, s in statuses.items()],
            "verdict": {"passed": False, "reasons": ["x"]}}


def test_smoke_failure_is_pinned_on_the_node_the_report_names_not_the_run_once_host(tmp_path):
    from datetime import datetime, timezone
    doc = _smoke_doc({"node1": "ok", "node2": "ok", "node3": "rollcall_failed"}, missing=["node3"])
    summary = build_summary(_smoke_run(tmp_path, doc), None, datetime.now(timezone.utc))
    assert summary["failed_nodes"] == ["node3"] and summary["ready_nodes"] == ["node1", "node2"]
    assert summary["exit_code"] == EXIT_NODES_FAILED and summary["reason"] == "nodes failed: node3"
    assert summary["nodes"]["node3"]["smoke_status"] == "rollcall_failed"
    jsonschema.validate(summary, json.loads(SCHEMA_PATH.read_text()))


def test_cluster_wide_smoke_failure_leaves_no_node_ready(tmp_path):
    from datetime import datetime, timezone
    doc = _smoke_doc({"node1": "ok", "node2": "ok", "node3": "ok"})  # e.g. a bandwidth regression
    summary = build_summary(_smoke_run(tmp_path, doc), None, datetime.now(timezone.utc))
    assert summary["failed_nodes"] == ["node1", "node2", "node3"] and summary["ready_nodes"] == []


RESCUE_PLAY = """
- name: Recover on purpose
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Try, and recover
      block:
        - name: Fail inside the block
          ansible.builtin.fail:
            msg: expected, and rescued
      rescue:
        - name: Fail in the rescue too, where told to
          ansible.builtin.assert:
            that: not (fail_in_rescue | default(false) | bool)
            fail_msg: the rescue itself failed
"""


def test_a_failure_rescued_inside_a_block_does_not_fail_the_node(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(RESCUE_PLAY)
    inventory = tmp_path / "inv.yml"
    hosts = {name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
             for name in ("n1", "n2")}
    hosts["n2"]["fail_in_rescue"] = True
    inventory.write_text(json.dumps({"gpu_nodes": {"hosts": hosts}}))
    run = run_stage("validate", inventory, tmp_path / "out", out=open(os.devnull, "w"), playbook=play)
    from datetime import datetime, timezone
    summary = build_summary(run, None, datetime.now(timezone.utc))
    assert classify(run) == (EXIT_NODES_FAILED, "nodes failed: n2")
    assert summary["ready_nodes"] == ["n1"] and summary["failed_nodes"] == ["n2"]
    rescued = summary["nodes"]["n1"]["stages"]["Recover on purpose"]
    assert rescued["status"] == "ok" and rescued["failed"] == 0 and rescued["rescued"] == 1
    assert "the rescue itself failed" in summary["nodes"]["n2"]["reason"]


@pytest.mark.parametrize("source", ["fifo", "/dev/stdin"])
def test_extra_vars_from_a_pipe_or_device_are_refused_instead_of_waiting_forever(tmp_path, source):
    """Issue 35 N19: `-e @FILE` reads a regular file only; a FIFO or /dev/stdin would block the run unbounded."""
    from cli_helpers import clean_env, local_inventory

    repo = Path(__file__).resolve().parents[3]
    if source == "fifo":
        source = str(tmp_path / "vars.fifo")
        os.mkfifo(source)
    artifacts = tmp_path / "out"
    argv = ["run", "preflight", "-i", str(local_inventory(tmp_path / "inv.yml", hosts=("n1",))),
            "--artifacts", str(artifacts), "-e", f"@{source}"]
    stdin, writer = os.pipe()  # a pipe nobody writes to or closes, as a CI job's stdin may be
    try:  # the timeout only ends a run that blocks (the bug); the verdict is the refusal below
        proc = subprocess.run([sys.executable, "-m", "gpufleet", *argv], cwd=tmp_path, stdin=stdin,
                              env=clean_env(PYTHONPATH=str(repo)), capture_output=True, text=True, timeout=120,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gpufleet blocked reading -e @{source}")
    finally:
        os.close(stdin)
        os.close(writer)
    summary = json.loads((artifacts / "summary.json").read_text())
    assert proc.returncode == 2 and summary["ansible_rc"] is None, proc.stderr
    assert source in summary["reason"] and "regular file" in summary["reason"], summary["reason"]
