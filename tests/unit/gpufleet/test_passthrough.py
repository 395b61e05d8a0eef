"""Options reach ansible-playbook unchanged, progress names the running task, output has no colour
when it is not a terminal, and the table and progress lines fit the terminal's width."""

import json
import re
import threading
import time

from cli_helpers import REPO, Out, closed_port, local_inventory, run_cli

from gpufleet import collection
from gpufleet.runner import AnsibleOptions, classify, colour_enabled, paint, run_stage, short_stage_names
from gpufleet.summary import build_summary, summary_table

RECORD_PLAY = """
- name: Record what Ansible was given
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Write the extra variables and run options this host sees
      delegate_to: localhost
      tags: [record]
      check_mode: false
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'GPUFLEET_REPORT_DIR') }}/{{ inventory_hostname }}.json"
        mode: "0644"
        content: "{{ {'nested': nested | default(None), 'quoted': quoted | default(None),
          'from_file': from_file | default(None), 'n': n | default(None), 's': s | default(None),
          'check_mode': ansible_check_mode, 'diff_mode': ansible_diff_mode, 'verbosity': ansible_verbosity,
          'forks': ansible_forks, 'run_tags': ansible_run_tags, 'skip_tags': ansible_skip_tags} | to_json }}"
    - name: A task the skip-tags option removes
      tags: [skipped_one]
      ansible.builtin.fail:
        msg: --skip-tags was not passed through
"""

# The task ends when the test says so (the marker): at most two minutes if the test never does.
GATED_PLAY = """
- name: Take a while
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Wait for the test on every node
      ansible.builtin.command: timeout 120 sh -c 'while [ ! -e {marker} ]; do sleep 0.1; done'
      changed_when: false
"""

SLOW_PLAY = """
- name: Take a while
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Sleep a while on every node
      ansible.builtin.command: sleep 3
      changed_when: false
"""


def test_options_are_passed_through_as_ansible_playbook_options():
    options = AnsibleOptions(limit="rack1:!n3", tags="health", skip_tags="smoke", extra_vars=["a=1", "@v.yml"],
                             check=True, diff=True, verbosity=3, forks=7, user="alice", private_key="k.pem")
    assert options.args() == ["--limit", "rack1:!n3", "--tags", "health", "--skip-tags", "smoke", "--forks", "7",
                              "--user", "alice", "--private-key", "k.pem", "--extra-vars", "a=1",
                              "--extra-vars", "@v.yml", "--check", "--diff", "-vvv"]
    assert options.shown_args().count("<hidden>") == 2 and "a=1" not in options.shown_args()


def test_extra_vars_and_run_options_reach_ansible_unchanged(outside, monkeypatch):
    monkeypatch.chdir(outside)  # @vars.yml is relative to the user's directory, as with ansible-playbook
    (outside / "vars.yml").write_text("from_file:\n  list: [1, two]\n")
    play = outside / "play.yml"
    play.write_text(RECORD_PLAY)
    nested = {"a": {"b": [1, 2.5, None, True]}}
    quoted = "it's \"quoted\" $HOME `x` a=b"
    options = AnsibleOptions(extra_vars=[json.dumps({"nested": nested}), json.dumps({"quoted": quoted}),
                                         "@vars.yml", 'n=3 s="two words"'],
                             check=True, diff=True, verbosity=1, forks=3, skip_tags="skipped_one")
    run = run_stage("validate", local_inventory(outside / "inv.yml"), outside / "out", options=options,
                    out=Out(), playbook=play)
    assert classify(run)[0] == 0, run.tracker.tallies
    seen = json.loads((outside / "out" / "reports" / "n1.json").read_text())
    assert seen["nested"] == nested and seen["quoted"] == quoted
    assert seen["from_file"] == {"list": [1, "two"]}
    assert seen["n"] == "3" and seen["s"] == "two words"
    assert seen["check_mode"] is True and seen["diff_mode"] is True
    assert seen["verbosity"] == 1 and seen["forks"] == 3 and seen["skip_tags"] == ["skipped_one"]


def test_user_and_private_key_reach_the_ssh_connection(outside):
    inventory = outside / "inv.ini"
    inventory.write_text(f"[gpu_nodes]\nn1 ansible_host=127.0.0.1 ansible_port={closed_port()} ansible_connection=ssh\n")
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts, "-u", "alice",
                      "--private-key", "keys/id_test", "-vvv"], cwd=outside)
    assert result.rc == 2  # the only node is unreachable
    ansible_output = (artifacts / "runner" / "stdout").read_text()
    assert "ESTABLISH SSH CONNECTION FOR USER: alice" in ansible_output
    # relative to the directory gpufleet ran in, as ansible-playbook would take it
    assert f'IdentityFile="{outside}/keys/id_test"' in ansible_output


GATED_BEAT = "Take a while / Wait for the test on every node: still running on n1"


def test_progress_names_the_running_task_and_its_nodes(outside, monkeypatch):
    """The heartbeat keeps naming the running task and its node while the task runs. The task waits
    for the test, not for a clock: it ends once three heartbeats were seen (no verdict on timing)."""
    monkeypatch.setenv("COLUMNS", "160")  # wide enough for the whole task name (80 cuts it)
    marker = outside / "seen-three-beats"
    play = outside / "play.yml"
    play.write_text(GATED_PLAY.format(marker=marker))
    out = Out()

    def release_after_three_beats():
        while not marker.exists():
            if out.text.count(GATED_BEAT) >= 3:
                marker.touch()
            time.sleep(0.05)

    watcher = threading.Thread(target=release_after_three_beats, daemon=True)
    watcher.start()
    try:
        run = run_stage("validate", local_inventory(outside / "inv.yml"), outside / "out", out=out, playbook=play,
                        progress_every=0.2)
    finally:
        marker.touch()
        watcher.join(timeout=10)
    assert classify(run)[0] == 0, out.text
    beats = [line for line in out.text.splitlines() if "still running" in line]
    # On a loaded machine a beat may come while an earlier task (fact gathering) still runs, or after n1 has
    # finished and n2 not yet: each beat names the nodes still running, and with the done count they are the
    # play's two; the gated task is named by the three beats it waited for.
    for line in beats:
        running = re.search(r": still running on ((?:n\d, )*n\d) \((\d+) done", line)
        assert running, out.text
        assert len(running.group(1).split(", ")) + int(running.group(2)) == 2, line
    assert len([line for line in beats if GATED_BEAT in line]) >= 3, out.text
    stamps = [float(re.match(r"\[\s*([\d.]+)s\]", line).group(1)) for line in beats]
    assert stamps == sorted(stamps)


def test_no_colour_unless_a_terminal_says_so(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert colour_enabled(Out(tty=True)) and not colour_enabled(Out(tty=False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_enabled(Out(tty=True))
    assert paint("FAILED", "failed", True) == "\x1b[31mFAILED\x1b[0m" and paint("FAILED", "failed", False) == "FAILED"


def test_captured_output_and_artifacts_carry_no_escape_codes(outside):
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml", hosts=("n1",)),
                      "--artifacts", artifacts, "-v"], cwd=outside)
    assert result.rc in (0, 1), result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    for path in artifacts.rglob("*"):
        if path.is_file():
            assert "\x1b" not in path.read_text(errors="replace"), path


def test_stage_names_come_from_the_playbooks_tags():
    names = short_stage_names(collection.locate().root)
    assert names["Preflight the GPU nodes"] == "preflight"
    assert names["Install the planned GPU software stack"] == "stack"
    assert names["Reboot the nodes that need it, once"] == "reboot"
    assert names["Configure the RDMA fabric and the NCCL environment"] == "fabric"
    assert names["Check GPU node health"] == "health"
    assert names["Prove the cluster trains"] == "smoke"


SITE_PLAYS = ["Preflight the GPU nodes", "Install the planned GPU software stack",
              "Reboot the nodes that need it, once", "Record the installed stack",
              "Configure the RDMA fabric and the NCCL environment", "Check GPU node health", "Run the GPU diagnostics",
              "Find slow nodes and links", "Prove the cluster trains"]
SITE_STAGES = ["preflight", "stack", "reboot", "fabric", "health", "diagnostics", "bandwidth", "smoke"]


def _site_run(tmp_path, hosts):
    """A finished site run in which the smoke job failed: the report blames the last node; the verdict
    task failed on the first, which ran it once for all."""
    from gpufleet.runner import EventTracker, PlayTally, StageRun
    from gpufleet.summary import SMOKE_VERDICT_TASK

    reports = tmp_path / "reports"
    reports.mkdir(parents=True)
    (reports / "smoke.json").write_text(json.dumps({
        "hosts_expected": hosts, "missing_nodes": [hosts[-1]], "backend": "gloo",
        "nodes": [{"name": h, "status": "ok" if h != hosts[-1] else "rollcall_failed"} for h in hosts],
        "verdict": {"passed": False, "reasons": [f"{hosts[-1]} did not join the roll call within 300 s"]}}))
    tracker = EventTracker(out=Out())
    tracker.plays = list(SITE_PLAYS)
    tracker.tallies = {play: {h: PlayTally(ok=3, changed=1) for h in hosts} for play in SITE_PLAYS}
    tracker.tallies[SITE_PLAYS[-1]][hosts[0]] = PlayTally(
        ok=5, failed=1, first_failure=f"{SMOKE_VERDICT_TASK}: smoke test FAILED", failed_tasks=[SMOKE_VERDICT_TASK])
    tracker.hosts_seen = tracker.hosts_checked = list(hosts)
    tracker.finished_playbook = True
    return StageRun(stage="site", inventory=tmp_path / "inv.yml", artifacts=tmp_path, rc=2, tracker=tracker,
                    hosts=list(hosts), duration_s=1.0, runner_status="failed",
                    stage_names=short_stage_names(collection.locate().root))


def test_the_summary_fits_80_columns_and_shows_a_smoke_failure_with_its_reason(tmp_path, monkeypatch):
    from datetime import datetime, timezone

    monkeypatch.setenv("COLUMNS", "80")
    hosts = [f"gpu-node-with-a-long-name-{i:03d}.rack12.example.internal" for i in range(1, 4)]
    summary = build_summary(_site_run(tmp_path, hosts), None, datetime.now(timezone.utc))
    assert summary["failed_nodes"] == [hosts[-1]]
    table = summary_table(summary)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    for stage in SITE_STAGES:  # no stage left out
        assert stage in table, stage
    assert "left out" not in table
    for host in hosts:  # host names whole
        assert any(host in line for line in lines), host

    def block(host):  # a node's lines, joined where they wrap
        start = table.index(host)
        end = min([table.index(h) for h in hosts if table.index(h) > start] + [table.index("result:")])
        return " ".join(table[start:end].split())

    assert "smoke FAILED" in block(hosts[-1])
    assert "smoke: smoke job: rollcall_failed:" in block(hosts[-1]) and "did not join the roll call" in block(hosts[-1])
    assert "FAILED" not in block(hosts[0]) and "smoke ok" in block(hosts[0])  # it only ran the verdict


def test_a_narrow_run_keeps_one_column_per_stage(tmp_path, monkeypatch):
    from datetime import datetime, timezone

    monkeypatch.setenv("COLUMNS", "200")
    summary = build_summary(_site_run(tmp_path, ["n1", "n2", "n3"]), None, datetime.now(timezone.utc))
    lines = summary_table(summary).splitlines()
    assert lines[0].split() == ["node", "status", *SITE_STAGES, "findings"]
    row = lines[4].split()
    assert row[0] == "n3" and row[1] == "failed" and row[SITE_STAGES.index("smoke") + 2] == "FAILED"
    assert "smoke: smoke job: rollcall_failed: n3 did not join" in lines[5]


def test_progress_lines_fit_the_width(monkeypatch):
    from gpufleet.runner import EventTracker, PlayTally

    monkeypatch.setenv("COLUMNS", "80")
    out = Out()
    tracker = EventTracker(out=out)
    hosts = [f"gpu-node-with-a-long-name-{i:03d}.rack12.example.internal" for i in range(40)]
    tracker.handle({"event": "playbook_on_play_start",
                    "event_data": {"play": "Install the planned GPU software stack"}})
    tracker.handle({"event": "playbook_on_task_start", "event_data": {"task": "Install the NVIDIA driver " * 4}})
    for host in hosts:
        tracker.handle({"event": "runner_on_start", "event_data": {"host": host}})
    beat = tracker.heartbeat_line()
    assert max(len(line) for line in beat.splitlines()) <= 80, beat
    assert "still running on 40 nodes" in beat and "gpu-node-with-a-long-name-000.rack12.example.internal" in beat
    tracker.tallies[tracker.plays[0]][hosts[0]] = PlayTally(failed=1, first_failure="apt failed: " + "E: x " * 200)
    tracker.finish()
    printed = out.text.splitlines()
    assert printed and max(len(line) for line in printed) <= 80, max(printed, key=len)
    assert any(hosts[0] in line and "failed" in line for line in printed)


def test_summary_json_keeps_full_play_names_and_their_short_names(outside):
    play = outside / "play.yml"
    play.write_text(SLOW_PLAY.replace("sleep 3", "sleep 0"))
    run = run_stage("validate", local_inventory(outside / "inv.yml"), outside / "out", out=Out(), playbook=play)
    from datetime import datetime, timezone
    summary = build_summary(run, None, datetime.now(timezone.utc))
    assert list(summary["nodes"]["n1"]["stages"]) == ["Take a while"]
    assert summary["stage_names"] == {"Take a while": "take"}


def test_version_names_package_collection_and_ansible(outside):
    import tomllib

    import yaml

    from gpufleet import __version__
    result = run_cli(["--version"], cwd=outside)
    assert result.rc == 0
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert __version__ == galaxy["version"] == project["version"]
    assert result.stdout.startswith(f"gpufleet {__version__}; collection gpufleet.cluster {galaxy['version']}")
    assert "ansible-core 2." in result.stdout
