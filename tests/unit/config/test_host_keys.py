"""SSH host keys are checked by default, and the simulated cluster passes that check honestly.

ansible.cfg must not switch checking off (neither host_key_checking nor ssh_args options); the
simulated cluster's inventory trusts exactly the host keys its nodes were given, through a
known_hosts file of its own, so it works with checking on and trusts nothing else.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "sim"))

from gfsim import cluster as simlib  # noqa: E402
from gfsim.node import NodePaths  # noqa: E402


def effective_config() -> dict:
    """What ansible-core makes of the repository's ansible.cfg (not what the file's text suggests)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    for name in list(env):
        if name.startswith("ANSIBLE_") and name != "ANSIBLE_CONFIG":
            del env[name]
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-config"), "dump", "--format", "yaml",
                          "-t", "all"], env=env, cwd=REPO, capture_output=True, text=True, check=True).stdout
    flat = {}
    for item in yaml.safe_load(out):
        if "name" in item:
            flat[item["name"]] = item["value"]
            continue
        # {"CONNECTION_PLUGINS": [{"ssh": [{"name": ..., "value": ...}, ...]}, ...]}
        for plugins in item.values():
            for plugin in plugins if isinstance(plugins, list) else []:
                for plugin_name, options in plugin.items():
                    for option in options:
                        flat[f"{plugin_name.split()[0]}.{option['name']}"] = option["value"]
    return flat


def test_host_key_checking_is_on_by_default():
    config = effective_config()
    assert config["HOST_KEY_CHECKING"] is True


def test_ssh_args_do_not_disable_host_key_checking():
    config = effective_config()
    args = " ".join(str(config.get(k) or "") for k in ("ssh.ssh_args", "ssh.ssh_common_args", "ssh.ssh_extra_args"))
    assert "StrictHostKeyChecking=no" not in args and "UserKnownHostsFile=/dev/null" not in args, args
    assert "ControlPersist" in args, "the dump did not include the ssh connection options"


def fake_cluster(tmp_path: Path, monkeypatch) -> dict:
    monkeypatch.setattr(simlib, "STATE_ROOT", tmp_path)
    state = {"name": "trustunit", "repo_url": "http://10.201.0.1:8080/cuda", "mirror_url": "http://10.201.0.1:8080/debian",
             "fingerprint": "A" * 40, "ssh_key": str(tmp_path / "trustunit/ssh/id_ed25519"), "nodes": {}}
    for index, node in enumerate(["node1", "node2"], 2):
        ip = f"10.201.0.{index}"
        state["nodes"][node] = {"index": index - 1, "ip": ip}
        keydir = NodePaths(tmp_path / "trustunit", node).upper / "etc/ssh"
        keydir.mkdir(parents=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{node}",
                        "-f", str(keydir / "ssh_host_ed25519_key")], check=True)
    return state


def ssh_option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == "-o" and args[index + 1].split("=", 1)[0].lower() == name.lower():
            return args[index + 1].split("=", 1)[1]
    return None


def test_sim_inventory_checks_host_keys_against_the_nodes_own_keys(tmp_path, monkeypatch):
    state = fake_cluster(tmp_path, monkeypatch)
    inventory = tmp_path / "elsewhere" / "inventory.yml"
    simlib.write_inventory(state, inventory)
    group = yaml.safe_load(inventory.read_text())["all"]["children"]["gpu_nodes"]
    args = shlex.split(group["vars"]["ansible_ssh_common_args"])
    assert ssh_option(args, "StrictHostKeyChecking") == "yes"
    known_hosts = Path(ssh_option(args, "UserKnownHostsFile"))
    assert known_hosts.is_absolute() and known_hosts.is_file()
    for node, entry in state["nodes"].items():
        pub = (NodePaths(tmp_path / "trustunit", node).upper / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
        # ssh-keygen -F finds the node's address in the file, and it carries the node's own key.
        found = subprocess.run(["ssh-keygen", "-F", entry["ip"], "-f", str(known_hosts)],
                               capture_output=True, text=True, check=False)
        assert found.returncode == 0, f"{node} {entry['ip']} missing from {known_hosts}"
        lines = [line.split() for line in found.stdout.splitlines() if line and not line.startswith("#")]
        assert [(line[1], line[2]) for line in lines] == [(pub[0], pub[1])]


def test_sim_inventory_refuses_a_node_without_a_host_key(tmp_path, monkeypatch):
    state = fake_cluster(tmp_path, monkeypatch)
    (NodePaths(tmp_path / "trustunit", "node2").upper / "etc/ssh/ssh_host_ed25519_key.pub").unlink()
    with pytest.raises(RuntimeError, match="node2.*host key"):
        simlib.write_inventory(state, tmp_path / "inventory.yml")
