"""Issue 34, item 7: what gpufleet prints fits 80 columns and keeps what matters -- the running task, a
failure's cause -- and the command line's help and errors read like the rest."""

import re

import pytest
from cli_helpers import Out, clean_env, REPO, run_cli

from gpufleet import console
from gpufleet.runner import EventTracker, PlayTally
from gpufleet.summary import summary_table

SSH_REFUSED = ("Failed to connect to the host via ssh: ssh: connect to host gpu-node-017.rack12.example.internal "
               "port 22: Connection refused")


def test_the_progress_line_shows_the_task_and_cuts_the_play_first(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    tracker = EventTracker(out=Out())
    tracker.handle({"event": "playbook_on_play_start",
                    "event_data": {"play": "Install the planned GPU software stack on every node of the cluster"}})
    tracker.handle({"event": "playbook_on_task_start", "event_data": {"task": "Install the NVIDIA driver"}})
    tracker.handle({"event": "runner_on_start", "event_data": {"host": "gpu-node-001"}})
    beat = tracker.heartbeat_line()
    assert max(len(line) for line in beat.splitlines()) <= 80, beat
    assert "Install the NVIDIA driver" in beat and "gpu-node-001" in beat


def test_a_failure_line_keeps_its_cause_at_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = Out()
    tracker = EventTracker(out=out)
    tracker.handle({"event": "playbook_on_play_start", "event_data": {"play": "Preflight the GPU nodes"}})
    tracker.handle({"event": "playbook_on_task_start", "event_data": {"task": "Gather facts"}})
    long_failure = "Gather facts: " + "the connection plugin said many things first; " * 6 + SSH_REFUSED
    tracker.tallies[tracker.plays[0]]["gpu-node-017"] = PlayTally(unreachable=1, first_failure=long_failure)
    tracker.finish()
    printed = out.text.splitlines()
    assert max(len(line) for line in printed) <= 80, printed
    assert "Connection refused" in " ".join(printed), printed


def test_the_summary_tables_failure_line_keeps_its_cause():
    summary = {"stage_names": {"Preflight the GPU nodes": "preflight"}, "result": "nodes_failed", "exit_code": 1,
               "reason": "nodes failed: n1",
               "nodes": {"n1": {"status": "failed", "findings": [], "failed_stage": "preflight",
                                "reason": "the connection plugin said many things first; " * 4 + SSH_REFUSED,
                                "stages": {"Preflight the GPU nodes": {"status": "unreachable"}}}}}
    text = summary_table(summary, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Connection refused" in text, text


def test_clip_middle_keeps_both_ends():
    assert console.clip_middle("a" * 50 + "CAUSE", 20).endswith("CAUSE")
    assert len(console.clip_middle("x" * 100, 30)) == 30
    assert console.clip_middle("short", 30) == "short"


@pytest.mark.parametrize("command", [["run", "--help"], ["--help"], ["compat", "--help"], ["plan", "--help"],
                                     ["mirror", "--help"]], ids=" ".join)
def test_help_wraps_to_the_terminal_and_lists_compat(outside, command):
    result = run_cli(command, cwd=outside, env=clean_env(PYTHONPATH=str(REPO), COLUMNS="60"))
    assert result.rc == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= 60, result.stdout
    top = run_cli(["--help"], cwd=outside, env=clean_env(PYTHONPATH=str(REPO), COLUMNS="80"))
    assert re.search(r"^\s+compat\s", top.stdout, re.MULTILINE), top.stdout


@pytest.mark.parametrize(("typo", "meant"),
                         [("--inventroy", "--inventory"), ("--artefacts", "--artifacts"), ("--skip-tag", "--skip-tags")])
def test_an_unknown_option_is_named_with_the_nearest_and_writes_no_artifacts(outside, typo, meant):
    result = run_cli(["run", "preflight", typo, "inv.yml"], cwd=outside)
    assert result.rc == 2
    assert f"unknown option {typo}" in result.stderr and f"did you mean {meant}?" in result.stderr, result.stderr
    assert list(outside.iterdir()) == [], list(outside.iterdir())


def test_verbose_output_prints_results_as_yaml(outside, monkeypatch):
    from cli_helpers import local_inventory

    monkeypatch.chdir(outside)  # a user's directory: no ansible.cfg of the clone's applies
    for name in [n for n in __import__("os").environ if n.startswith("ANSIBLE_")]:
        monkeypatch.delenv(name)

    play = outside / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                    "    - name: Say two lines\n      ansible.builtin.debug:\n        msg: {first: one, second: two}\n")
    from gpufleet.runner import AnsibleOptions, run_stage

    out = Out()
    run_stage("validate", local_inventory(outside / "inv.yml", hosts=("n1",)), outside / "out", out=out,
              playbook=play, options=AnsibleOptions(verbosity=1))
    assert re.search(r"^\s+first: one\s*$", out.text, re.MULTILINE), out.text
    assert '"first": "one"' not in out.text


def test_ansible_children_print_no_dsa_deprecation_warning(outside):
    from cli_helpers import local_inventory

    # A configuration error stops the run after ansible-playbook's first play: quick, and Ansible did start.
    inventory = local_inventory(outside / "inv.yml", smoke_test_launchr="srun")
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", outside / "out"], cwd=outside)
    assert result.rc == 2
    assert "DSA is deprecated" not in result.stdout + result.stderr
    assert "DSA is deprecated" not in (outside / "out" / "runner" / "stdout").read_text()
