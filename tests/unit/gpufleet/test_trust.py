"""`gpufleet run` keeps SSH host-key checking as the user's configuration says (on by default), tested
where it happens: against a private sshd on 127.0.0.1 whose host key the known_hosts file does not hold."""

from cli_helpers import REPO, Out, clean_env, keygen, private_sshd, run_cli

from gpufleet.runner import classify, run_stage

PING_PLAY = """
- name: Log in
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Reach the node
      ansible.builtin.ping:
"""


def _env(tmp_path):
    # ControlPersist masters would outlive the test; the control path stays out of the user's home.
    return clean_env(PYTHONPATH=str(REPO), ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp_path / "cp"),
                     ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))


def test_the_harness_logs_in_when_the_host_key_is_known(tmp_path, monkeypatch):
    """The control case: with the right key in known_hosts the same inventory logs in."""
    with private_sshd(tmp_path / "sshd") as sshd:
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n")
        inventory = sshd.inventory(tmp_path / "inv.ini", known_hosts)
        play = tmp_path / "play.yml"
        play.write_text(PING_PLAY)
        for name, value in _env(tmp_path).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("ANSIBLE_SSH_ARGS", "-o ControlMaster=no")
        monkeypatch.chdir(tmp_path)
        run = run_stage("preflight", inventory, tmp_path / "out", out=Out(), playbook=play)
        assert classify(run)[0] == 0, run.tracker.tallies
        assert sshd.accepted_logins()


def test_a_changed_host_key_stops_the_run_before_it_logs_in(tmp_path):
    with private_sshd(tmp_path / "sshd") as sshd:
        other_key = tmp_path / "other"
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {keygen(other_key)}\n")
        inventory = sshd.inventory(tmp_path / "inv.ini", known_hosts)
        artifacts = tmp_path / "out"
        result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts, "-vvvv"], cwd=tmp_path,
                         env=_env(tmp_path))
        assert result.rc == 2, result.stdout + result.stderr
        assert sshd.accepted_logins() == []
        ssh_argv = [line for line in (artifacts / "runner" / "stdout").read_text().splitlines() if "SSH: EXEC" in line]
        assert ssh_argv, "no ssh command line in Ansible's -vvvv output"
        assert not any("StrictHostKeyChecking=no" in line for line in ssh_argv), ssh_argv[0]
        assert "host_key_checking = True" in result.stdout
        assert result.summary(artifacts)["ready_nodes"] == []


def test_an_unknown_host_key_is_not_learned(tmp_path):
    with private_sshd(tmp_path / "sshd") as sshd:
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("")
        inventory = sshd.inventory(tmp_path / "inv.ini", known_hosts)
        result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", tmp_path / "out"], cwd=tmp_path,
                         env=_env(tmp_path))
        assert result.rc == 2, result.stdout + result.stderr
        assert sshd.accepted_logins() == []
        assert known_hosts.read_text() == ""
