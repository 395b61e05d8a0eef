"""The sample inventory's bastion line (inventory/group_vars/all/network.yml) reaches ssh as written,
beside the collection's connection reuse and keep-alives, not instead of them.

The ssh command line is read from what Ansible really runs (-vvv prints it), against a node address
and a bastion port where nothing listens on 127.0.0.1, so nothing leaves the machine.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
# The same ssh command line, read the same way, as the keep-alive test reads it.
from test_ssh_keepalive import options, ssh_argv

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "inventory" / "group_vars" / "all" / "network.yml"


def sample_setting(name: str):
    """The commented example of `name` in the sample, uncommented and read as YAML."""
    line = next(line for line in SAMPLE.read_text().splitlines() if re.match(rf"^# {name}: ", line))
    return yaml.safe_load(line[2:])[name]


def test_the_sample_bastion_line_is_a_proxyjump():
    assert sample_setting("ansible_ssh_common_args") == "-o ProxyJump=admin@bastion.example.internal:22"


def test_the_bastion_reaches_ssh_beside_connection_reuse_and_keepalives(tmp_path):
    bastion = sample_setting("ansible_ssh_common_args").replace("bastion.example.internal:22", "127.0.0.1:1")
    seen = options(ssh_argv(tmp_path, {"ansible_ssh_common_args": bastion}))
    assert seen["ProxyJump"] == "admin@127.0.0.1:1", seen
    assert seen["ControlMaster"] == "auto" and int(seen["ServerAliveInterval"]) > 0, seen


def test_the_proxycommand_variant_in_the_docs_keeps_its_options_in_one_word(tmp_path):
    """docs/bastion.md's ProxyCommand gives the jump connection its own known_hosts and keep-alives."""
    text = (REPO / "docs" / "bastion.md").read_text()
    block = re.search(r"```yaml\n(ansible_ssh_common_args: >-\n.*?)```", text, re.S).group(1)
    common = yaml.safe_load(block)["ansible_ssh_common_args"].replace("bastion.example.internal", "127.0.0.1")
    seen = options(ssh_argv(tmp_path, {"ansible_ssh_common_args": common}))
    jump = shlex.split(seen["ProxyCommand"])
    assert jump[0] == "ssh" and jump[-3:] == ["-W", "%h:%p", "admin@127.0.0.1"], jump
    assert options(jump) == {"UserKnownHostsFile": "/srv/gpufleet/known_hosts", "StrictHostKeyChecking": "yes",
                             "ServerAliveInterval": "15", "ServerAliveCountMax": "4"}
