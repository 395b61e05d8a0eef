"""Options reach ansible-playbook unchanged, progress names the running task, output has no colour
when it is not a terminal, and the table fits 100 columns."""

import json
import re

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


def test_progress_names_the_running_task_and_its_nodes(outside):
    play = outside / "play.yml"
    play.write_text(SLOW_PLAY)
    out = Out()
    run = run_stage("validate", local_inventory(outside / "inv.yml"), outside / "out", out=out, playbook=play,
                    progress_every=0.5)
    assert classify(run)[0] == 0
    beats = [line for line in out.text.splitlines() if "still running" in line]
    assert beats, out.text
    assert all("Take a while / Sleep a while on every node: still running on n1" in line for line in beats[:1])
    # one line at least every interval while the 3 s task ran
    stamps = [float(re.match(r"\[\s*([\d.]+)s\]", line).group(1)) for line in beats]
    assert len(stamps) >= 3 and max(b - a for a, b in zip(stamps, stamps[1:])) < 1.5


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


def _site_summary(hosts):
    plays = ["Preflight the GPU nodes", "Install the planned GPU software stack", "Reboot the nodes that need it, once",
             "Record the installed stack", "Configure the RDMA fabric and the NCCL environment",
             "Check GPU node health", "Prove the cluster trains"]
    tally = {"status": "unreachable", "ok": 1, "changed": 0, "failed": 0, "skipped": 0, "unreachable": 1,
             "first_failure": "x" * 200}
    nodes = {h: {"status": "failed", "stages": {p: dict(tally) for p in plays},
                 "findings": [{"code": "ECC", "severity": "fail", "node": h}] * 12, "versions": {}} for h in hosts}
    return {"nodes": nodes, "stage_names": short_stage_names(collection.locate().root), "result": "nodes_failed",
            "exit_code": 1, "reason": "nodes failed: " + ", ".join(hosts)}


def test_summary_table_fits_100_columns_for_the_whole_site_run():
    hosts = [f"gpu-node-with-a-very-long-name-{i:03d}.rack12.example.internal" for i in range(40)]
    table = summary_table(_site_summary(hosts))
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert lines[0].split() == ["node", "status", "preflight", "stack", "reboot", "fabric", "health", "smoke",
                                "findings"]
    assert "unreach" in lines[2] and "12F 0W" in lines[2]


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
