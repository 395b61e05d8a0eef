#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_holds_info
short_description: Find the holds, pins and version locks that keep packages at a version, and whose they are
version_added: "0.4.0"
description:
  - Reads the dpkg selections of O(names) (C(dpkg-query)), the apt preferences files and the dnf versionlock
    list, and reports every hold, pin and lock on those packages with the version it keeps and where it is set.
  - A hold is gpufleet's when gpufleet recorded that version for that package (O(record), or a version pin in
    one of O(own_pin_files)); every other hold that keeps a package off O(version) is reported in RV(foreign),
    so a role can ask before it moves what an operator pinned.
options:
  names:
    description: The packages to look at.
    type: list
    elements: str
    required: true
  version:
    description: The version the caller is about to install; a hold at this version is in nobody's way.
    type: str
    default: ""
  own_pin_files:
    description: apt preferences files gpufleet writes. Their version pins, and dpkg holds at those versions, are gpufleet's.
    type: list
    elements: path
    default: []
  record:
    description: A JSON file mapping each package to the version whose hold the caller set; absent means none.
    type: path
  apt_preferences:
    description: The apt preferences file and directories to read.
    type: list
    elements: path
    default: [/etc/apt/preferences, /etc/apt/preferences.d]
  versionlock_list:
    description: The dnf versionlock plugin's list.
    type: path
    default: /etc/dnf/plugins/versionlock.list
  timeout:
    description: Seconds C(dpkg-query) may run; past them the module fails, naming the command and the limit.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.cluster.read_only
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Find holds an operator set on NCCL
  gpufleet.cluster.package_holds_info:
    names: [libnccl2, libnccl-dev]
    version: 2.18.3-1+cuda12.2
    own_pin_files: [/etc/apt/preferences.d/gpufleet-nccl]
    record: /var/lib/gpufleet/nccl-holds.json
  register: holds

- name: Stop before moving them
  ansible.builtin.fail:
    msg: "{{ holds.message }}"
  when: holds.foreign | length > 0
"""

RETURN = r"""
holds:
  description: Every hold, pin and lock on the packages (C(package), C(kind), C(version), C(source), C(gpufleet)).
  returned: always
  type: list
  elements: dict
foreign:
  description: The holds that keep a package off O(version) and that gpufleet did not set.
  returned: always
  type: list
  elements: dict
message:
  description: The foreign holds in one line; empty when there are none.
  returned: always
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils import package_holds
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def preference_files(paths: list) -> list:
    """The files apt reads: each file named, and each directory's entries (apt ignores other names)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += [os.path.join(path, name) for name in sorted(os.listdir(path))
                      if name.endswith(".pref") or "." not in name]
        elif os.path.isfile(path):
            files.append(path)
    return files


def dpkg_selections(module, names: list) -> dict:
    dpkg_query = module.get_bin_path("dpkg-query")
    if not dpkg_query:
        return {}
    timeout = module.params["timeout"]
    argv = [dpkg_query, "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", "--"] + names
    rc, out, err, timed_out = run_tool(module, argv, timeout, environ_update=C_LOCALE)
    if timed_out:
        module.fail_json(msg="dpkg-query -W %s did not answer within %ds (package_holds_info timeout)" % (" ".join(names), timeout))
    if rc not in (0, 1):  # 1: a name dpkg does not know
        module.fail_json(msg="dpkg-query -W %s failed (rc %d): %s" % (" ".join(names), rc, err.strip()))
    return package_holds.parse_dpkg_selections(out)


def recorded_holds(module) -> dict:
    path = module.params["record"]
    if not path or not os.path.exists(path):
        return {}
    try:
        recorded = json.loads(read_text(path))
    except ValueError as exc:
        module.fail_json(msg="the hold record %s is not JSON (%s); remove it or fix it" % (path, exc))
    if not isinstance(recorded, dict):
        module.fail_json(msg="the hold record %s is not a {package: version} map" % path)
    return {str(name): str(version) for name, version in recorded.items()}


def main():
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            "version": {"type": "str", "default": ""},
            "own_pin_files": {"type": "list", "elements": "path", "default": []},
            "record": {"type": "path"},
            "apt_preferences": {"type": "list", "elements": "path",
                                "default": ["/etc/apt/preferences", "/etc/apt/preferences.d"]},
            "versionlock_list": {"type": "path", "default": "/etc/dnf/plugins/versionlock.list"},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    names, planned = module.params["names"], module.params["version"]
    own_files = set(module.params["own_pin_files"])
    pins = []
    for path in preference_files(module.params["apt_preferences"]):
        pins += package_holds.parse_apt_preferences(read_text(path), path)
    locks = package_holds.parse_versionlock(read_text(module.params["versionlock_list"]), names,
                                            module.params["versionlock_list"])
    holds = package_holds.holds_on(names, dpkg_selections(module, names), pins, locks)
    own = package_holds.own_pins([pin for pin in pins if pin["source"] in own_files], names)
    own.update(recorded_holds(module))
    foreign = package_holds.foreign_holds(holds, planned, own)
    for hold in holds:
        hold["gpufleet"] = own.get(hold["package"]) == hold["version"]
    module.exit_json(changed=False, holds=holds, foreign=foreign, message=package_holds.describe(foreign))


if __name__ == "__main__":
    main()
