# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The Ansible settings a run needs, merged with the user's configuration instead of replacing it.

The user's ansible.cfg (wherever Ansible finds it: ANSIBLE_CONFIG, ./, ~/, /etc/ansible/) and
ANSIBLE_* environment stay in force. For each setting the collection needs, the user's value wins
wherever they set one; otherwise the value of the collection's own ansible.cfg applies. Ansible's
config manager says which is which (a setting's origin is "default" when nobody set it). Every needed
setting is then handed to ansible-runner as its ANSIBLE_* environment variable with its effective
value, because ansible-runner fills in its own choice for some variables it does not find (it turns
host-key checking off), and an explicit value is the only way to keep the user's.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

SSH = ("connection", "ssh")
# Sent with every SSH connection unless the user's ssh arguments already set keep-alives: a node that
# freezes mid-run then fails as unreachable after about a minute instead of stalling the whole run.
KEEPALIVE_OPTIONS = "-o ServerAliveInterval=15 -o ServerAliveCountMax=4"


@dataclass(frozen=True)
class Needed:
    label: str  # the name printed for the operator
    name: str  # Ansible's name: a base setting, or an option of `plugin`
    plugin: tuple[str, str] | None
    why: str


NEEDED = (
    Needed("forks", "DEFAULT_FORKS", None, "the smoke job starts its launcher on every node at once"),
    Needed("pipelining", "pipelining", SSH, "fewer SSH round trips per task"),
    Needed("interpreter_python", "INTERPRETER_PYTHON", None, "the nodes' system Python, not a discovered one"),
    Needed("ssh_args", "ssh_args", SSH, "SSH connection reuse (ControlMaster/ControlPersist)"),
    Needed("host_key_checking", "host_key_checking", SSH, "refuse a node whose SSH host key is unknown or changed"),
)


@dataclass(frozen=True)
class Effective:
    label: str
    value: object
    source: str  # where the value came from, for the operator


def _managers(collection_cfg: Path | None):
    """Config managers for the user's configuration and for the collection's ansible.cfg, both with
    the SSH connection plugin's option definitions loaded."""
    from ansible import constants
    from ansible.config.manager import ConfigManager
    from ansible.plugins.loader import connection_loader

    # Loading the plugin imports ansible-core's ssh-agent client, whose import of cryptography's DSA classes
    # warns from cryptography 51 on ("DSA is deprecated"): a deprecation only ansible-core can act on, which
    # would otherwise be the first thing on gpufleet's stderr in every run.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="DSA is deprecated")
        connection_loader.get("ssh", class_only=True)  # registers the plugin's option definitions
    definitions = constants.config.get_configuration_definitions(*SSH)
    user = ConfigManager()  # finds the user's ansible.cfg the way ansible-playbook will
    collection = ConfigManager(conf_file=str(collection_cfg)) if collection_cfg and collection_cfg.is_file() else None
    for manager in filter(None, (user, collection)):
        manager.initialize_plugin_configuration_definitions(*SSH, definitions)
    return user, collection


def _value(manager, needed: Needed):
    plugin_type, plugin_name = needed.plugin or (None, None)
    return manager.get_config_value_and_origin(needed.name, plugin_type=plugin_type, plugin_name=plugin_name)


def _env_name(manager, needed: Needed) -> str:
    plugin_type, plugin_name = needed.plugin or (None, None)
    definition = manager.get_configuration_definition(needed.name, plugin_type=plugin_type, plugin_name=plugin_name)
    return definition["env"][0]["name"]


def _as_env(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ":".join(map(str, value))
    return str(value)


def _source(origin: str, collection_cfg: Path | None) -> str:
    if origin == "default":
        return "Ansible's default"
    if collection_cfg is not None and origin == str(collection_cfg):
        return "gpufleet.cluster's ansible.cfg"
    if origin.startswith("env:"):
        return f"your environment ({origin[4:].strip()})"
    return f"your {origin}"


def _keepalive_source(user, ssh_args: Effective) -> str | None:
    """Where the user's SSH arguments already set keep-alives, or None."""
    if "ServerAliveInterval" in str(ssh_args.value):
        return ssh_args.source
    for option in ("ssh_common_args", "ssh_extra_args"):
        value, origin = user.get_config_value_and_origin(option, plugin_type=SSH[0], plugin_name=SSH[1])
        if "ServerAliveInterval" in str(value or ""):
            return _source(origin, None)
    return None


def merge(collection_cfg: Path | None, forks_option: int | None = None) -> tuple[dict[str, str], list[Effective]]:
    """(ANSIBLE_* variables for ansible-runner, the effective needed settings and their sources)."""
    user, collection = _managers(collection_cfg)
    env: dict[str, str] = {}
    effective: list[Effective] = []
    for needed in NEEDED:
        value, origin = _value(user, needed)
        if origin == "default" and collection is not None:
            value, origin = _value(collection, needed)
        found = Effective(needed.label, value, _source(origin, collection_cfg))
        if needed.label == "forks" and forks_option is not None:
            found = Effective("forks", forks_option, "the command line (-f)")
        if needed.label == "ssh_args":
            keepalive = _keepalive_source(user, found)
            if keepalive is None:
                found = Effective("ssh_args", f"{found.value} {KEEPALIVE_OPTIONS}".strip(),
                                  f"{found.source}, keep-alives added by gpufleet")
        env[_env_name(user, needed)] = _as_env(found.value)
        effective.append(found)
    return env, effective


def describe(effective: list[Effective]) -> list[str]:
    """One line per needed setting: its value and where it came from."""
    return [f"{item.label} = {item.value} ({item.source})" for item in effective]


def forks_problem(smoke_hosts: int, forks: int, forks_source: str) -> str | None:
    """Why a torchrun smoke job on `smoke_hosts` nodes cannot start with `forks`, or None when it can."""
    if forks <= 0 or smoke_hosts <= forks:
        return None
    return (f"the smoke job would start its torchrun launcher on {smoke_hosts} nodes at once, but forks is {forks} "
            f"({forks_source}), so the nodes past {forks} would start after the others gave up waiting; "
            f"give -f {smoke_hosts} (or forks in ansible.cfg), --limit the run to {forks} nodes, skip the job "
            "(--skip-tags smoke), or use -e smoke_test_launcher=srun on a Slurm cluster")
