"""stack_record through ansible-playbook on localhost: probe, record, probe again - and a variable that only a
role's default reads (no list names it) changes the key, by digest, never by value (issue 25, F5: the key
parts are a module argument, which Ansible's events record; a proxy password or an index token must not be there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.gpufleet.cluster.plugins.plugin_utils import stack_key

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent
ROLES = ["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"]
SECRET = "s3cret-token"


def run_play(tmp_path: Path, tasks: list, extra_vars: dict | None = None) -> subprocess.CompletedProcess:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    watch = {"files": [str(tmp_path / "pin")]}
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "node1", "gather_facts": False, "tasks": tasks, "vars": {
        "record_path": str(tmp_path / "stack-state.json"), "out": str(tmp_path / "out.json"),
        "nccl_version_string": "2.19.3-1+cuda12.2",
        **{role + "_watch": watch if role == "nccl" else {} for role in ROLES}}}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    args = ["-e", json.dumps(extra_vars)] if extra_vars else []
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(play), *args],
                          capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)
    proc.out = proc.stdout + proc.stderr
    return proc


def probe(name: str, **task) -> dict:
    return {"name": name, "gpufleet.cluster.stack_record": {"roles": ROLES, "path": "{{ record_path }}"},
            "register": name, **task}


def test_probe_record_probe_and_a_default_only_variable_changes_the_key(tmp_path):
    (tmp_path / "pin").write_text("Pin: version 2.19.3-1+cuda12.2\n")
    (tmp_path / "req.lock").write_text("a\n")
    proxy = {"https_proxy": f"http://user:{SECRET}@proxy:3128"}
    tasks = [
        probe("before"),
        {"name": "record", "gpufleet.cluster.stack_record": {
            "probe": "{{ before }}", "path": "{{ record_path }}", "installed": {"nccl": "2.19.3"}}},
        probe("again"),
        # gpufleet_proxy_env is read by the roles' *_proxy_env defaults only.
        probe("proxied", vars={"gpufleet_proxy_env": proxy}),
        probe("tokened", vars={"gpufleet_pytorch_index_url": f"https://{SECRET}@gitlab.example.com/pypi/simple"}),
        # A lock file named relative to the playbook, found where the pytorch role's lookup finds it.
        probe("locked", vars={"pytorch_requirements_lock": "req.lock"}),
        {"name": "relock", "ansible.builtin.copy": {"dest": "%s/req.lock" % tmp_path, "content": "b\n", "mode": "0644"}},
        probe("relocked", vars={"pytorch_requirements_lock": "req.lock"}),
        probe("full", **{"gpufleet.cluster.stack_record": {"roles": ROLES, "path": "{{ record_path }}", "full": True}}),
        {"name": "out", "ansible.builtin.copy": {"dest": "{{ out }}", "mode": "0644", "content": (
            "{{ {'before': before, 'again': again, 'proxied': proxied, 'tokened': tokened, 'full': full, "
            "'locked': locked.key_parts.inputs, 'relocked': relocked.key_parts.inputs} | to_json }}")}},
    ]
    result = run_play(tmp_path, tasks)
    assert result.returncode == 0, result.out[-4000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["before"]["converged"] is False and "no converged state recorded" in out["before"]["reason"]
    assert out["again"]["converged"] is True, out["again"]
    assert out["again"]["installed"] == {"nccl": "2.19.3"}
    assert out["again"]["key"] == out["before"]["key"]
    # Every role's declared variables are keyed, and the record's own code with the roles'.
    inputs = out["again"]["key_parts"]["inputs"]
    assert {"nvidia_driver_branch", "cuda_toolkit_versions", "nccl_version_string", "pytorch_venv"} <= set(inputs)
    assert "plugins/action/stack_record.py" in out["again"]["key_parts"]["code"]
    # and the play that holds the probe (issue 35 N4: the play decides which roles run)
    assert str((tmp_path / "play.yml").resolve()) in out["again"]["key_parts"]["code"]
    proxied = out["proxied"]
    assert proxied["converged"] is False and proxied["key"] != out["again"]["key"]
    assert "inputs.nvidia_driver_proxy_env" in proxied["reason"] and "inputs.pytorch_proxy_env" in proxied["reason"]
    tokened = out["tokened"]
    assert not tokened["converged"] and tokened["reason"].endswith("inputs.pytorch_index_url"), tokened["reason"]
    assert SECRET not in result.out and SECRET not in json.dumps([proxied, tokened])
    assert sorted(name for name, digest in out["relocked"].items() if out["locked"][name] != digest) == [
        "pytorch_requirements_lock (content)"]
    assert not out["locked"]["pytorch_requirements_lock (content)"].startswith("unreadable")
    assert out["full"]["converged"] is False and out["full"]["key"] == out["again"]["key"]
    # A watched file that moved is drift under the same key (the same play: the play is in the key).
    (tmp_path / "pin").write_text("Pin: version 2.18.3-1+cuda12.2\n")
    moved = run_play(tmp_path, tasks)
    after = json.loads((tmp_path / "out.json").read_text())["before"]
    assert after["converged"] is False and after["drift"] and str(tmp_path / "pin") in after["drift"][0], moved.out[-3000:]


def test_a_record_without_a_role_s_watch_list_is_refused(tmp_path):
    tasks = [probe("before"), {"name": "forget", "ansible.builtin.set_fact": {"pytorch_watch": None}},
             {"name": "record", "gpufleet.cluster.stack_record": {"probe": "{{ before }}", "path": "{{ record_path }}"}}]
    result = run_play(tmp_path, tasks)
    assert result.returncode != 0
    assert "pytorch_watch must be a dict" in result.out, result.out[-3000:]
    assert not (tmp_path / "stack-state.json").exists()


def test_the_stack_play_s_wiring_resolves_for_every_role_variable(tmp_path):
    """With playbooks/gpu_stack.yml's own play variables and a real plan, every variable the roles declare is
    templated before the roles run (none keyed by its bare expression), at the value the role gets."""
    stack_play = yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())[0]
    plan = ("{{ {'torch': '2.1.2'} | gpufleet.cluster.stack_plan(gpus=['NVIDIA H100 80GB HBM3'], os='ubuntu22.04', "
            "arch='x86_64', nvswitch=true) }}")
    tasks = [{"name": "plan", "ansible.builtin.set_fact": {"gpu_stack_plan": plan}},
             {**probe("probed"), "vars": stack_play["vars"]},
             {"name": "out", "ansible.builtin.copy": {"dest": "{{ out }}", "mode": "0644",
                                                      "content": "{{ {'probed': probed, 'plan': gpu_stack_plan} | to_json }}"}}]
    result = run_play(tmp_path, tasks)
    assert result.returncode == 0, result.out[-4000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["probed"]["unresolved"] == [], out["probed"]["unresolved"]
    inputs = out["probed"]["key_parts"]["inputs"]
    assert inputs["nvidia_driver_branch"] == stack_key.digest(out["plan"]["driver_branch"])
    assert inputs["nccl_version_string"] == stack_key.digest(out["plan"]["nccl_package_version"])
    assert inputs["pytorch_numpy_version"] == stack_key.digest("1.26.4")  # the role's vars/main.yml default
