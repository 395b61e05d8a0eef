"""The user's ansible.cfg is merged with the settings the collection needs, not a replacement for them;
the run says where each came from, and a smoke job that cannot fit in forks is refused before it starts."""

import json

from cli_helpers import Out, local_inventory, run_cli

from gpufleet.runner import classify, run_stage

CONFIG_PLAY = """
- name: Record the settings in force
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Write what Ansible runs with
      delegate_to: localhost
      run_once: true
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'GPUFLEET_REPORT_DIR') }}/settings.json"
        mode: "0644"
        content: "{{ {'forks': ansible_forks,
          'remote_user': lookup('ansible.builtin.config', 'DEFAULT_REMOTE_USER'),
          'pipelining': lookup('ansible.builtin.config', 'pipelining', plugin_type='connection', plugin_name='ssh'),
          'ssh_args': lookup('ansible.builtin.config', 'ssh_args', plugin_type='connection', plugin_name='ssh'),
          'host_key_checking': lookup('ansible.builtin.config', 'host_key_checking', plugin_type='connection',
                                      plugin_name='ssh')} | to_json }}"
"""


def _record(outside, monkeypatch, config_text):
    (outside / "ansible.cfg").write_text(config_text)
    # The user's ./ansible.cfg only: an ANSIBLE_CONFIG from the test runner (tools/test.sh sets one) would win.
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.chdir(outside)  # Ansible reads ./ansible.cfg, as it would for the user
    play = outside / "play.yml"
    play.write_text(CONFIG_PLAY)
    out = Out()
    run = run_stage("validate", local_inventory(outside / "inv.yml"), outside / "out", out=out, playbook=play)
    assert classify(run)[0] == 0, run.tracker.tallies
    return json.loads((outside / "out" / "reports" / "settings.json").read_text()), out.text


def test_a_user_config_that_sets_only_remote_user_keeps_the_collections_settings(outside, monkeypatch):
    seen, printed = _record(outside, monkeypatch, "[defaults]\nremote_user = operator7\n")
    assert seen["remote_user"] == "operator7"  # the user's setting stays in force
    assert seen["forks"] == 64 and seen["pipelining"] is True and seen["host_key_checking"] is True
    assert "ServerAliveInterval" in seen["ssh_args"] and "ControlPersist" in seen["ssh_args"]
    assert "gpufleet: forks = 64 (gpufleet.cluster's ansible.cfg)" in printed
    assert "gpufleet: pipelining = True (gpufleet.cluster's ansible.cfg)" in printed


def test_the_users_own_values_win_and_are_named_as_theirs(outside, monkeypatch):
    seen, printed = _record(outside, monkeypatch, "[defaults]\nforks = 7\nhost_key_checking = false\n")
    assert seen["forks"] == 7 and seen["host_key_checking"] is False
    assert f"gpufleet: forks = 7 (your {outside / 'ansible.cfg'})" in " ".join(printed.split())  # wrapped to fit


def test_a_smoke_job_larger_than_forks_is_refused_before_anything_runs(outside):
    artifacts = outside / "out"
    result = run_cli(["run", "smoke", "-i", local_inventory(outside / "inv.yml", hosts=("n1", "n2", "n3")),
                      "-f", "2", "--artifacts", artifacts], cwd=outside)
    summary = json.loads((artifacts / "summary.json").read_text())
    assert result.rc == 2 and summary["ansible_rc"] is None, summary["reason"]
    assert "on 3 nodes at once, but forks is 2 (the command line (-f))" in summary["reason"]
    assert not (artifacts / "runner" / "job_events").exists()
