"""A cancelled run (SIGTERM from CI, Ctrl-C, a hang-up) ends ansible-playbook and everything it started, exits 2,
and calls no node passed; a SIGKILL of gpufleet leaves nothing of Ansible's running either.
The nodes hang on a tarpit: a loopback listener that accepts and never answers."""

import json
import os
import signal
from pathlib import Path

import pytest
from cli_helpers import (REPO, Tarpit, clean_env, descendants, end_processes, hanging_inventory, local_inventory,
                         process_ids_with, run_cli, start_cli, wait_for)


def test_sigterm_while_nodes_hang_ends_ansible_and_passes_no_node(tmp_path):
    tarpit = Tarpit()
    inventory = hanging_inventory(tmp_path / "inv.ini", tarpit)
    artifacts = tmp_path / "out"
    # The nodes hang for as long as the test needs: no SSH connect timeout cuts them short.
    env = clean_env(PYTHONPATH=str(REPO), ANSIBLE_TIMEOUT="600", ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp_path / "cp"))
    proc = start_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], tmp_path, env)
    playbook_pids = []
    try:
        assert wait_for(lambda: len(tarpit.held) >= 2, 120), (tmp_path / "stdout").read_text()
        playbook_pids = process_ids_with(str(inventory))  # ansible-playbook and its workers
        assert playbook_pids
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        left = [pid for pid in playbook_pids if pid in process_ids_with(str(inventory))]
        left += process_ids_with(str(inventory)) + process_ids_with(f"-o Port={tarpit.port}")
        assert rc == 2, (tmp_path / "stderr").read_text()
        assert not left, f"left running after the cancel: {left}"
        summary = json.loads((artifacts / "summary.json").read_text())
        assert summary["result"] == "run_broken" and "SIGTERM" in summary["reason"]
        assert summary["ready_nodes"] == []
        assert not [name for name, node in summary["nodes"].items() if node["status"] == "passed"]
        assert summary["nodes"]["quick"]["status"] == "not_run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_processes(process_ids_with(str(inventory)) + process_ids_with(f"-o Port={tarpit.port}"))
        tarpit.close()


# -- issue 35 N1: a hang-up or a SIGKILL of gpufleet leaves nothing of Ansible's running -----------------------

_GONE_WITHIN_S = 15  # the bound the issue sets for everything Ansible started to be gone


def _start_hanging_run(tmp_path):
    """`gpufleet run` with its private directories under tmp_path/tmp, held by two hanging nodes."""
    tarpit = Tarpit()
    inventory = hanging_inventory(tmp_path / "inv.ini", tarpit)
    private_parent = tmp_path / "tmp"
    private_parent.mkdir()
    env = clean_env(PYTHONPATH=str(REPO), ANSIBLE_TIMEOUT="600", ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp_path / "cp"),
                    TMPDIR=str(private_parent))
    proc = start_cli(["run", "preflight", "-i", inventory, "--artifacts", tmp_path / "out"], tmp_path, env)
    assert wait_for(lambda: len(tarpit.held) >= 2, 120), (tmp_path / "stdout").read_text()
    assert process_ids_with(str(inventory)), "ansible-playbook is not running"
    return proc, tarpit, inventory, private_parent


def _ansible_left(inventory, tarpit):
    return process_ids_with(str(inventory)) + process_ids_with(f"-o Port={tarpit.port}")


def _runner_dirs(private_parent):
    return sorted(private_parent.glob("gpufleet-runner-*"))


def _clean_up(proc, tarpit, inventory):
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    end_processes(_ansible_left(inventory, tarpit))
    tarpit.close()


def test_a_hang_up_ends_ansible_removes_the_runner_directory_and_says_so(tmp_path):
    proc, tarpit, inventory, private_parent = _start_hanging_run(tmp_path)
    try:
        proc.send_signal(signal.SIGHUP)  # the terminal closed
        assert wait_for(lambda: not _ansible_left(inventory, tarpit), _GONE_WITHIN_S), _ansible_left(inventory, tarpit)
        assert wait_for(lambda: not _runner_dirs(private_parent), _GONE_WITHIN_S), _runner_dirs(private_parent)
        assert proc.wait(timeout=30) == 2, (tmp_path / "stderr").read_text()
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["result"] == "run_broken"
        assert "SIGHUP" in summary["reason"] and "hung up" in summary["reason"], summary["reason"]
        assert summary["ready_nodes"] == []
    finally:
        _clean_up(proc, tarpit, inventory)


def test_a_sigkill_of_gpufleet_leaves_no_ansible_and_no_runner_directory(tmp_path):
    proc, tarpit, inventory, private_parent = _start_hanging_run(tmp_path)
    try:
        proc.kill()  # the CI runner's kill after its grace period, or the OOM killer
        proc.wait()
        assert wait_for(lambda: not _ansible_left(inventory, tarpit), _GONE_WITHIN_S), _ansible_left(inventory, tarpit)
        assert wait_for(lambda: not _runner_dirs(private_parent), _GONE_WITHIN_S), _runner_dirs(private_parent)
    finally:
        _clean_up(proc, tarpit, inventory)


def test_the_next_run_clears_the_runner_directory_a_killed_run_left(tmp_path):
    """gpufleet and its watchdog killed at once (kill -9 of both): Ansible still ends, and the private
    runner directory left behind (the environment dump) is removed by the next run, not by a guess."""
    proc, tarpit, inventory, private_parent = _start_hanging_run(tmp_path)
    try:
        watchdogs = [pid for pid in descendants(proc.pid) if pid in process_ids_with("launch.py")]
        proc.kill()
        for pid in watchdogs:
            os.kill(pid, signal.SIGKILL)
        proc.wait()
        assert wait_for(lambda: not _ansible_left(inventory, tarpit), _GONE_WITHIN_S), _ansible_left(inventory, tarpit)
        left = _runner_dirs(private_parent)
        assert left, "the killed run left no runner directory: nothing for the next run to clear"
        live = private_parent / "gpufleet-runner-live"  # a directory of a run that still runs: kept
        live.mkdir()
        (live / "gpufleet.pid").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
        quick = local_inventory(tmp_path / "quick.yml", hosts=("n1",))
        env = clean_env(PYTHONPATH=str(REPO), TMPDIR=str(private_parent))
        result = run_cli(["run", "preflight", "-i", quick, "--artifacts", tmp_path / "next"], tmp_path, env)
        assert result.rc in (0, 1), result.stderr  # passes on a GPU node, fails checks elsewhere
        assert _runner_dirs(private_parent) == [live]
    finally:
        _clean_up(proc, tarpit, inventory)


def _start_time(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


# -- issue 35 N3: a cancel that arrives after Ansible ended ----------------------------------------------------

PRINTING_PLAY = """
- name: Check the nodes
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Print a credential (a task that forgot no_log)
      ansible.builtin.debug:
        msg: "{{ mirror_password }}"
"""
LATE_SECRET = "late-cancel-secret-51c7"


def _in_process_run(outside, monkeypatch):
    import functools

    from gpufleet import cli
    from gpufleet import runner as runner_mod

    play = outside / "play.yml"
    play.write_text(PRINTING_PLAY)
    monkeypatch.chdir(outside)
    monkeypatch.setattr(cli, "run_stage", functools.partial(runner_mod.run_stage, playbook=play))
    inventory = local_inventory(outside / "inv.yml", hosts=("n1",))
    return cli, runner_mod, ["run", "validate", "-i", str(inventory), "--artifacts", str(outside / "out"),
                             "-e", f"mirror_password={LATE_SECRET}"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_cancel_while_the_artifacts_are_scrubbed_still_scrubs_them_and_says_when_it_came(
        outside, monkeypatch, signum):
    cli, runner_mod, argv = _in_process_run(outside, monkeypatch)
    real_scrub = runner_mod.scrub_tree

    def cancelled_while_scrubbing(directory, secrets):
        os.kill(os.getpid(), signum)  # the CI's cancel lands now, after ansible-playbook ended
        return real_scrub(directory, secrets)

    monkeypatch.setattr(runner_mod, "scrub_tree", cancelled_while_scrubbing)
    rc = cli.main(argv)
    files = [p for p in (outside / "out").rglob("*") if p.is_file()]
    assert files and not [p for p in files if LATE_SECRET in p.read_text(errors="replace")]
    reason = json.loads((outside / "out" / "summary.json").read_text())["reason"]
    assert rc == 2 and signal.Signals(signum).name in reason, reason
    assert "before ansible-playbook started" not in reason and "after ansible-playbook ended" in reason


def test_a_cancel_while_the_summary_is_printed_is_no_traceback_and_keeps_the_verdict(outside, monkeypatch):
    cli, _runner_mod, argv = _in_process_run(outside, monkeypatch)
    real_table = cli.summary_table

    def cancelled_while_printing(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # the summary is already written: the verdict stands
        return real_table(*args, **kwargs)

    monkeypatch.setattr(cli, "summary_table", cancelled_while_printing)
    rc = cli.main(argv)
    summary = json.loads((outside / "out" / "summary.json").read_text())
    assert rc == summary["exit_code"] == 0, summary["reason"]
