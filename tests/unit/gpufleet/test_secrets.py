"""No credential from the environment, -e or a URL reaches any file under --artifacts."""

import json

from cli_helpers import Out, clean_env, local_inventory, run_cli

from gpufleet.runner import AnsibleOptions, run_stage
from gpufleet.secrets import MASK, scrub_text, secret_values

ENV_SECRET = "ci-job-token-5f0c9e1d7a"
EXTRA_SECRET = "mirror-pass-83b1c4"
PROXY_PASSWORD = "proxy-pw-77e2"

CARELESS_PLAY = """
- name: Use the credentials carelessly
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Print every credential (a task that forgot no_log)
      ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.env', 'CI_JOB_TOKEN') }} {{ mirror_password }} {{ proxy_url }}"
    - name: Write them into a report too
      delegate_to: localhost
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'GPUFLEET_REPORT_DIR') }}/{{ inventory_hostname }}.txt"
        content: "{{ lookup('ansible.builtin.env', 'CI_JOB_TOKEN') }} {{ mirror_password }} {{ proxy_url }}\\n"
        mode: "0644"
"""


def _assert_clean(artifacts):
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for secret in (ENV_SECRET, EXTRA_SECRET, PROXY_PASSWORD):
            assert secret.encode() not in data, f"{secret} leaked into {path}"
    return files


def test_the_cli_keeps_env_and_extra_var_secrets_out_of_every_artifact(outside):
    artifacts = outside / "out"
    env = clean_env(PYTHONPATH=str(__import__("cli_helpers").REPO), CI_JOB_TOKEN=ENV_SECRET)
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml", hosts=("n1",)),
                      "--artifacts", artifacts, "-vvv", "-e", f"mirror_password={EXTRA_SECRET}",
                      "-e", json.dumps({"proxy_url": f"http://build:{PROXY_PASSWORD}@proxy.internal:3128"})],
                     cwd=outside, env=env)
    assert result.rc in (0, 1), result.stderr  # passes on a GPU node, fails checks elsewhere
    files = _assert_clean(artifacts)
    names = {p.relative_to(artifacts).as_posix() for p in files}
    assert {"summary.json", "runner/stdout", "runner/command"} <= names
    assert any(n.startswith("runner/job_events/") for n in names)
    # ansible-runner's own dump of the environment and inputs does not come along
    assert not any(n.startswith("runner/env/") for n in names)
    assert "env" not in json.loads((artifacts / "runner" / "command").read_text())


def test_secrets_a_careless_task_prints_are_scrubbed(outside, monkeypatch):
    monkeypatch.setenv("CI_JOB_TOKEN", ENV_SECRET)
    play = outside / "play.yml"
    play.write_text(CARELESS_PLAY)
    artifacts = outside / "out"
    options = AnsibleOptions(extra_vars=[f"mirror_password={EXTRA_SECRET}",
                                         f"proxy_url=http://build:{PROXY_PASSWORD}@proxy.internal:3128"], verbosity=0)
    run_stage("validate", local_inventory(outside / "inv.yml"), artifacts, options=options, out=Out(),
              playbook=play, secrets=secret_values())
    _assert_clean(artifacts)
    report = (artifacts / "reports" / "n1.txt").read_text()
    assert report.count(MASK) == 3 and "proxy.internal" in report  # the rest of the line stays readable


def test_scrubbing_rules():
    secrets = secret_values(environ={"GITHUB_TOKEN": "ghp_abcdef123", "HOME": "/root", "API_KEY": "short"},
                            extra_vars={"mirror": {"password": "p@ss-word-1"}, "gpufleet_hosts": "gpu_nodes"})
    assert secrets == ["ghp_abcdef123", "p@ss-word-1"]  # "short" is too short to replace blindly; HOME is no secret
    text = "token ghp_abcdef123 pw p@ss-word-1 url https://u:pw-1234@mirror/x home /root hosts gpu_nodes"
    assert scrub_text(text, secrets) == f"token {MASK} pw {MASK} url https://u:{MASK}@mirror/x home /root hosts gpu_nodes"
