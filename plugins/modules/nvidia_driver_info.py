#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_info
short_description: Find the installed NVIDIA driver by what owns it, with the packages a driver decision looks at
version_added: "0.5.0"
description:
  - Finds the driver's files (C(nvidia-smi), the kernel module, NVIDIA's C(nvidia-uninstall)), asks the package
    manager which packages own them (C(dpkg -S) or C(rpm -qf)), and lists the installed versions and holds of those
    owners, of O(names) and of the names this role installed last time (O(state_file)).
  - A driver no package owns (NVIDIA's C(.run) installer) is reported with the version C(nvidia-smi) gives.
  - The description is the input of the C(gpufleet.cluster.driver_decision) filter, which decides keep, install,
    upgrade, switch or replace. Parsing is done by C(plugins/module_utils/driver_decision.py).
options:
  names:
    description:
      - Package names to list besides the owners, both flavours' names and the kernel module packages (the plan's
        names, fabric manager). dnf module streams (C(@module:stream)) are left out.
    type: list
    elements: str
    default: []
  flavour_packages:
    description: The driver package names of each flavour, keys C(open) and C(proprietary), to tell the installed flavour.
    type: dict
    default: {}
  kmod_flavours:
    description: Kernel module package name -> flavour, where the family names the flavour by its kmod package (dnf).
    type: dict
    default: {}
  state_file:
    description: JSON list of the package names the role installed for the previous plan; absent means none.
    type: path
  manager:
    description: Package manager to ask; C(auto) picks dpkg, else rpm.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  timeout:
    description: Seconds each command may run; past them the module fails, naming the command and the limit.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.cluster.read_only
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Find the installed driver by what owns it
  gpufleet.cluster.nvidia_driver_info:
    names: [nvidia-driver-pinning-595, nvidia-open, cuda-drivers, nvidia-fabricmanager]
    flavour_packages: {open: [nvidia-driver-pinning-595, nvidia-open], proprietary: [nvidia-driver-pinning-595, cuda-drivers]}
    state_file: /var/lib/gpufleet/nvidia-driver-packages.json
  register: driver_node
"""

RETURN = r"""
current:
  description:
    - "None without a driver; C({kind: package, package, version, upstream, branch, flavour}) for the package that owns
      C(nvidia-smi); C({kind: unpackaged, files, upstream, uninstaller}) when no package owns it."
  returned: always
  type: dict
  sample: {"kind": "package", "package": "nvidia-utils", "version": "595.91.07-1ubuntu1", "upstream": "595.91.07",
           "branch": "595", "flavour": "open"}
installed:
  description: Name -> installed version of every package asked about that is installed.
  returned: always
  type: dict
held:
  description: The installed packages asked about that are held (dpkg selections; empty on dnf).
  returned: always
  type: list
  elements: str
owners:
  description: The packages that own the driver's files.
  returned: always
  type: list
  elements: str
files:
  description: The driver's files found (without NVIDIA's uninstaller).
  returned: always
  type: list
  elements: str
uninstaller:
  description: Path of NVIDIA's C(nvidia-uninstall) when present, else empty.
  returned: always
  type: str
previous:
  description: The names this role installed for the previous plan (O(state_file)).
  returned: always
  type: list
  elements: str
branch_packages:
  description: Installed packages whose names carry the installed driver's branch (C(*-535), C(*-535-open); apt only).
  returned: always
  type: list
  elements: str
queried:
  description: Every package name the query asked about.
  returned: always
  type: list
  elements: str
"""

import json
import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool

FIND_FILES = ["sh", "-c", "command -v nvidia-smi; modinfo -n nvidia 2>/dev/null; command -v nvidia-uninstall; true"]
DPKG_QUERY = ["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n"]


def _run(module, argv, timeout):
    rc, out, err, timed_out = run_tool(module, argv, timeout, environ_update=C_LOCALE)
    if timed_out:
        module.fail_json(msg=f"{' '.join(argv)} did not answer within {timeout}s (nvidia_driver_info timeout)",
                         rc=rc, stdout=out, stderr=err)
    return rc, out, err


def _previous(path):
    if not path or not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as handle:
            names = json.load(handle)
    except (OSError, ValueError):
        return []
    return [str(n) for n in names] if isinstance(names, list) else []


def main():
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "default": []},
            "flavour_packages": {"type": "dict", "default": {}},
            "kmod_flavours": {"type": "dict", "default": {}},
            "state_file": {"type": "path"},
            "manager": {"type": "str", "choices": ["auto", "apt", "dnf"], "default": "auto"},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    params, timeout = module.params, module.params["timeout"]
    manager = params["manager"]
    if manager == "auto":
        manager = "apt" if shutil.which("dpkg-query") else "dnf"
    outputs = {"previous": _previous(params["state_file"])}
    _rc, outputs["files"], _err = _run(module, FIND_FILES, timeout)
    files, _uninstaller = driver_decision.parse_driver_files(outputs["files"])
    owners = []
    if files:
        # rc 1: some file is owned by no package; that is an answer (dpkg -S prints it on stderr, rpm on stdout).
        argv = (["rpm", "-qf"] if manager == "dnf" else ["dpkg", "-S"]) + files
        _rc, outputs["owners"], _err = _run(module, argv, timeout)
        owners = (driver_decision.parse_rpm_owners if manager == "dnf"
                  else driver_decision.parse_dpkg_owners)(outputs["owners"])
    flavour_names = [n for names in params["flavour_packages"].values() for n in names or [] if not n.startswith("@")]
    queried = list(dict.fromkeys(owners + [n for n in params["names"] if not n.startswith("@")] + flavour_names
                                 + list(params["kmod_flavours"]) + outputs["previous"]))
    query = ["rpm", "-q"] if manager == "dnf" else DPKG_QUERY
    _rc, outputs["packages"], _err = _run(module, query + queried, timeout) if queried else (0, "", "")
    if files and not owners:
        _rc, outputs["smi_version"], _err = _run(
            module, ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout)
    node = driver_decision.describe_node(manager, outputs, params["flavour_packages"], params["kmod_flavours"])
    current = node["current"] or {}
    if manager == "apt" and current.get("kind") == "package":
        branch = current["branch"]
        _rc, outputs["branch_packages"], _err = _run(module, DPKG_QUERY + [f"*-{branch}", f"*-{branch}-open"], timeout)
        node = driver_decision.describe_node(manager, outputs, params["flavour_packages"], params["kmod_flavours"])
    module.exit_json(changed=False, manager=manager, queried=queried, **node)


if __name__ == "__main__":
    main()
