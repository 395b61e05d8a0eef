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


PROXY_PW_WITH_AT = "pr0xy@pw-9c1d"  # a password containing '@', as typed into an unencoded proxy URL
INDEX_TOKEN = "glpat-index-token-4e7a"  # a token-only URL: https://TOKEN@host/

LEAKY_PLAY = """
- name: Use mirror credentials carelessly
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Print the proxy environment and the index URL (a task that forgot no_log)
      ansible.builtin.debug:
        msg: "{{ gpufleet_proxy_env }} {{ gpufleet_pytorch_index_url }}"
    - name: Write them into a report too
      delegate_to: localhost
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'GPUFLEET_REPORT_DIR') }}/{{ inventory_hostname }}.txt"
        content: "{{ gpufleet_proxy_env.https_proxy }} {{ gpufleet_pytorch_index_url }}\\n"
        mode: "0644"
    - name: Fail with the URLs in the message, so they reach the summary's reasons
      ansible.builtin.fail:
        msg: "could not reach {{ gpufleet_pytorch_index_url }} through {{ gpufleet_proxy_env.https_proxy }}"
"""


def test_url_userinfo_is_masked_up_to_its_last_at_and_token_only_urls_too():
    text = (f"proxy http://build:{PROXY_PW_WITH_AT}@proxy.internal:3128/ "
            f"index https://{INDEX_TOKEN}@pypi.internal/simple 'https://u:p%40ss@x.example/' "
            "plain https://pypi.org/simple")
    clean = scrub_text(text, [])
    assert clean == (f"proxy http://build:{MASK}@proxy.internal:3128/ index https://{MASK}@pypi.internal/simple "
                     f"'https://u:{MASK}@x.example/' plain https://pypi.org/simple")


def test_the_cli_keeps_url_credentials_out_of_every_artifact_and_the_console(outside, monkeypatch, capsys):
    """The real CLI path (argument parsing, run, summary) with credentials in -e and in the inventory."""
    import functools

    from gpufleet import cli
    from gpufleet import runner as runner_mod

    play = outside / "play.yml"
    play.write_text(LEAKY_PLAY)
    proxy = f"http://build:{PROXY_PW_WITH_AT}@proxy.internal:3128"
    inventory = local_inventory(outside / "inv.yml", hosts=("n1",),
                                gpufleet_proxy_env={"http_proxy": proxy, "https_proxy": proxy})
    monkeypatch.chdir(outside)
    monkeypatch.setattr(cli, "run_stage", functools.partial(runner_mod.run_stage, playbook=play))
    artifacts = outside / "out"
    index = f"https://{INDEX_TOKEN}@pypi.internal/simple"
    rc = cli.main(["run", "validate", "-i", str(inventory), "--artifacts", str(artifacts), "-vvv",
                   "-e", json.dumps({"gpufleet_pytorch_index_url": index})])
    assert rc == 1  # the play fails n1 on purpose
    console = capsys.readouterr()
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    assert any(p.name == "n1.txt" for p in files) and any("job_events" in p.parts for p in files)
    leaked_parts = (PROXY_PW_WITH_AT, PROXY_PW_WITH_AT.split("@", 1)[1], INDEX_TOKEN)
    for path in files:
        data = path.read_text(errors="replace")
        for part in leaked_parts:
            assert part not in data, f"{part} leaked into {path}"
    for part in leaked_parts:
        assert part not in console.out + console.err, f"{part} leaked onto the console"
    reason = json.loads((artifacts / "summary.json").read_text())["nodes"]["n1"]["stages"]
    assert "proxy.internal" in json.dumps(reason)  # the rest of the URL stays readable


# -- issue 35 N12: credentials in a URL's query string ---------------------------------------------------------

AZURE_SIG = "sv2Zs9Ykq%2BQe0Rr3pF8dXx%3D"
AMZ_SIGNATURE = "4f2b1c9e0d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"
AMZ_CREDENTIAL = "AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/s3/aws4_request"
QUERY_TOKEN = "glpat-query-token-9d2f"


def test_secret_named_query_values_are_masked_and_the_rest_of_the_url_kept():
    text = (f"get https://acct.blob.core.windows.net/wheels/torch.whl?sv=2022-11-02&se=2026-12-31&sig={AZURE_SIG} "
            f"and 'https://bucket.s3.amazonaws.com/key.whl?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential={AMZ_CREDENTIAL}&X-Amz-Signature={AMZ_SIGNATURE}' "
            f"index https://user:{PROXY_PASSWORD}@gitlab.example/api/v4/simple?page=2&private_token={QUERY_TOKEN}#top "
            "plain https://pypi.org/simple?format=json&key= ok")
    clean = scrub_text(text, [])
    for secret in (AZURE_SIG, AMZ_SIGNATURE, AMZ_CREDENTIAL, QUERY_TOKEN, PROXY_PASSWORD):
        assert secret not in clean, clean
    assert clean == (
        f"get https://acct.blob.core.windows.net/wheels/torch.whl?sv=2022-11-02&se=2026-12-31&sig={MASK} "
        f"and 'https://bucket.s3.amazonaws.com/key.whl?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={MASK}&X-Amz-Signature={MASK}' "
        f"index https://user:{MASK}@gitlab.example/api/v4/simple?page=2&private_token={MASK}#top "
        "plain https://pypi.org/simple?format=json&key= ok")


def test_each_listed_query_name_is_a_secret_and_its_value_is_removed_everywhere():
    names = ("token", "access_token", "key", "api_key", "password", "secret", "client_secret", "sig", "signature",
             "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "X-Goog-Signature", "auth")
    for name in names:
        value = f"value-of-{name.lower()}-1234"
        url = f"https://h.example/p?a=1&{name}={value}"
        assert scrub_text(url, []) == f"https://h.example/p?a=1&{name}={MASK}", name
    # A token in an environment variable's URL is also removed where it appears on its own.
    secrets = secret_values(environ={"INDEX_URL": f"https://h.example/simple?token={QUERY_TOKEN}"})
    assert scrub_text(f"retrying with {QUERY_TOKEN}", secrets) == f"retrying with {MASK}"
