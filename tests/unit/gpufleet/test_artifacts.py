"""The artifacts directory: one run at a time, never a directory gpufleet did not make, only this run's
reports, a unique default name, an atomic summary, no private runner directory left behind, and
reasons that stay one short line."""

import json
import os
import resource
import signal
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from cli_helpers import (REPO, Out, Tarpit, clean_env, end_processes, hanging_inventory, local_inventory,
                         process_ids_with, run_cli, start_cli, wait_for)

from gpufleet import artifacts as artifacts_mod
from gpufleet import cli
from gpufleet import runner as runner_mod
from gpufleet.runner import AnsibleOptions, RunBroken, run_stage
from gpufleet.summary import build_summary

PASSING_PLAY = """
- name: Check the nodes
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Pass
      ansible.builtin.debug:
        msg: fine
"""

FAILED_SMOKE_REPORT = {"hosts_expected": ["n1"], "missing_nodes": [], "backend": "gloo",
                       "nodes": [{"name": "n1", "status": "rollcall_failed"}],
                       "verdict": {"passed": False, "reasons": ["n1 did not join"]}}


def test_a_second_run_on_a_directory_in_use_is_refused_and_writes_nothing_there(tmp_path):
    tarpit = Tarpit()
    artifacts = tmp_path / "out"
    env = clean_env(PYTHONPATH=str(REPO), ANSIBLE_TIMEOUT="600", ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp_path / "cp"))
    first_dir = tmp_path / "first"
    first_dir.mkdir()
    inventory = hanging_inventory(first_dir / "inv.ini", tarpit, local=())
    first = start_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], first_dir, env)
    try:
        assert wait_for(lambda: len(tarpit.held) >= 2, 120), (first_dir / "stdout").read_text()
        fallback_tmp = tmp_path / "tmp"  # the refused run's summary lands in a new directory here, not in /tmp
        fallback_tmp.mkdir()
        second = run_cli(["run", "preflight", "-i", local_inventory(tmp_path / "quick.yml", hosts=("n1",)),
                          "--artifacts", artifacts], cwd=tmp_path, env={**env, "TMPDIR": str(fallback_tmp)})
        assert second.rc == 2 and "Traceback" not in second.stderr
        assert "in use by another gpufleet run" in second.stderr
        assert second.summary_path().parent.parent == fallback_tmp
        assert not (artifacts / "summary.json").exists()  # the first run has not written its own yet
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 2
        assert "SIGTERM" in json.loads((artifacts / "summary.json").read_text())["reason"]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        end_processes(process_ids_with(str(inventory)))
        tarpit.close()


def test_a_directory_gpufleet_did_not_make_is_refused_and_left_alone(outside):
    artifacts = outside / "mine"
    (artifacts / "runner").mkdir(parents=True)
    (artifacts / "runner" / "keep.txt").write_text("my notes\n")
    (artifacts / "notes.txt").write_text("more notes\n")
    tmp = outside.parent / "tmp"  # the summary's fallback directory lands here, not in /tmp
    tmp.mkdir()
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml"), "--artifacts", artifacts],
                     cwd=outside, env=clean_env(PYTHONPATH=str(REPO), TMPDIR=str(tmp)))
    assert result.rc == 2
    assert result.summary_path().parent.parent == tmp
    summary = result.summary()
    assert "not a gpufleet artifacts directory" in summary["reason"] and str(artifacts) in summary["reason"]
    assert sorted(p.relative_to(artifacts).as_posix() for p in artifacts.rglob("*")) == [
        "notes.txt", "runner", "runner/keep.txt"]


def test_a_run_reads_only_the_reports_it_wrote(outside, monkeypatch):
    monkeypatch.chdir(outside)
    play = outside / "play.yml"
    play.write_text(PASSING_PLAY)
    inventory = local_inventory(outside / "inv.yml", hosts=("n1",))
    artifacts = outside / "out"
    run_stage("validate", inventory, artifacts, out=Out(), playbook=play)
    # What an earlier smoke run left behind must not fail a run that never ran the smoke job.
    (artifacts / "reports" / "smoke.json").write_text(json.dumps(FAILED_SMOKE_REPORT))
    run = run_stage("validate", inventory, artifacts, out=Out(), playbook=play)
    summary = build_summary(run, None, datetime.now(timezone.utc))
    assert summary["exit_code"] == 0, summary["reason"]
    assert summary["smoke"] is None and summary["ready_nodes"] == ["n1"]


def test_default_directory_names_never_collide(outside, monkeypatch):
    frozen = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.chdir(outside)
    monkeypatch.setattr(cli, "datetime", Frozen)
    for _run in range(2):  # two runs started in the same instant
        assert cli.main(["run", "preflight", "-i", "inv.yml"]) == 2  # no such inventory: run broke
    summaries = sorted((outside / "artifacts").glob("*/summary.json"))
    assert len(summaries) == 2, summaries


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, resource.RLIM_INFINITY))


def test_a_full_disk_never_leaves_a_partial_summary(outside):
    artifacts = outside / "out"
    argv = ["run", "preflight", "-i", "inv.yml", "--artifacts", str(artifacts)]  # no such inventory: run broke
    assert run_cli(argv, cwd=outside).rc == 2
    before = (artifacts / "summary.json").read_text()
    proc = subprocess.run([sys.executable, "-m", "gpufleet", *argv], cwd=outside, capture_output=True, text=True,
                          env=clean_env(PYTHONPATH=str(REPO), TMPDIR=str(outside)), preexec_fn=_limit_file_size,
                          timeout=300, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "summary.json could not be written" in proc.stderr
    assert (artifacts / "summary.json").read_text() == before  # the earlier summary, whole
    assert not [p for p in artifacts.iterdir() if p.name.startswith(".summary.json")]


def test_the_private_runner_directory_is_removed_when_copying_its_output_fails(outside, monkeypatch):
    private_parent = outside / "tmp"
    private_parent.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private_parent))
    monkeypatch.chdir(outside)
    play = outside / "play.yml"
    play.write_text(PASSING_PLAY)

    def broken_copy(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner_mod, "_copy_runner_output", broken_copy)
    with pytest.raises(RunBroken, match="No space left on device"):
        run_stage("validate", local_inventory(outside / "inv.yml", hosts=("n1",)), outside / "out", out=Out(),
                  playbook=play, options=AnsibleOptions())
    assert not list(private_parent.glob("gpufleet-runner-*"))


def test_reasons_are_one_short_line_whatever_the_error(outside, monkeypatch):
    def explode(*_args, **_kwargs):
        raise ValueError("a very long\nmulti-line message " * 1500)

    monkeypatch.chdir(outside)
    monkeypatch.setattr(cli, "run_stage", explode)
    monkeypatch.delenv("GPUFLEET_DEBUG", raising=False)
    assert cli.main(["run", "preflight", "-i", "inv.yml", "--artifacts", str(outside / "out")]) == 2
    reason = json.loads((outside / "out" / "summary.json").read_text())["reason"]
    assert reason.startswith("internal error: ValueError: a very long multi-line message")
    assert "\n" not in reason and len(reason) <= 500
    assert os.path.getsize(outside / "out" / "summary.json") < 4096


def test_a_marker_that_is_a_link_refuses_the_directory_and_leaves_its_target_alone(outside):
    """Issue 35 N7: the marker is opened without following a link, so a planted link truncates nothing."""
    victim = outside / "victim.txt"
    victim.write_text("precious\n")
    artifacts = outside / "out"
    artifacts.mkdir()
    (artifacts / ".gpufleet-artifacts").symlink_to(victim)
    with pytest.raises(artifacts_mod.ArtifactsRefused, match="symbolic link") as refused:
        artifacts_mod.claim(artifacts)
    assert str(artifacts) in str(refused.value)
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in artifacts.iterdir()) == [".gpufleet-artifacts"]


@pytest.mark.parametrize("extra", ["gpufleet_report_dir={elsewhere}", '{{"preflight_report_dir": "{elsewhere}"}}'])
def test_a_report_directory_outside_the_artifacts_is_refused_before_anything_runs(outside, extra):
    """Issue 35 N14: reports outside --artifacts would be neither scrubbed nor counted."""
    elsewhere = outside / "elsewhere"
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml", hosts=("n1",)),
                      "--artifacts", artifacts, "-e", extra.format(elsewhere=elsewhere)], cwd=outside)
    summary = json.loads((artifacts / "summary.json").read_text())
    assert result.rc == 2 and summary["ansible_rc"] is None, summary["reason"]
    assert "--artifacts" in summary["reason"] and "_report_dir" in summary["reason"], summary["reason"]
    assert not elsewhere.exists()
    assert not (artifacts / "runner" / "job_events").exists()
