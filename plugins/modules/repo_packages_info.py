#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: repo_packages_info
short_description: Ask the configured package repositories whether planned packages exist at planned versions
version_added: "0.2.0"
description:
  - Asks apt (C(apt-cache policy)) or dnf (C(dnf list --showduplicates), C(dnf module list)) what
    the configured repositories offer for each requested package, and whether the requested
    version is among it.
  - When several repository versions match (packaging revisions of one upstream version), the newest
    by the package manager's own rules is returned (dpkg's on apt, rpm's with epoch, C(~) and C(^) on dnf).
  - For a missing name it lists the names the repository has with the same prefix; for a missing
    version, the versions it has, newest first. Nothing is installed or changed.
  - Run it after the package lists are fresh (C(apt-get update)); it does not refresh them itself.
options:
  packages:
    description:
      - The planned packages. Each item has C(name), an optional C(version) and C(match).
      - C(match=upstream) accepts a repository version whose upstream part (no epoch, no package
        release) equals C(version), for example C(535.104.05) for C(535.104.05-0ubuntu1);
        C(match=exact) needs the full version string; C(match=any) only needs the name.
      - dnf module streams are named C(@module:stream) and checked against C(dnf module list).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Package name, or C(@module:stream) on dnf.
        type: str
        required: true
      version:
        description: Version to find; empty with C(match=any).
        type: str
        default: ""
      match:
        description: How C(version) is compared.
        type: str
        choices: [upstream, exact, any]
        default: upstream
  manager:
    description: Package manager to ask; C(auto) picks apt-cache, else dnf.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  timeout:
    description: Seconds each query may run before it is stopped and reported.
    type: int
    default: 120
extends_documentation_fragment:
  - gpufleet.cluster.read_only
seealso:
  - module: ansible.builtin.package_facts
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Check the driver packages against the CUDA repository
  gpufleet.cluster.repo_packages_info:
    packages:
      - {name: nvidia-kernel-open-535, version: 535.104.05}
      - {name: cuda-drivers-535, version: 535.104.05}
      - {name: libnccl2, version: 2.18.3-1+cuda12.2, match: exact}
  register: repo_check

- name: Stop when the repository cannot serve the plan
  ansible.builtin.assert:
    that: repo_check.ok
    fail_msg: "{{ inventory_hostname }}: {{ repo_check.message }}"
"""

RETURN = r"""
ok:
  description: True when every requested package exists at its requested version.
  returned: always
  type: bool
message:
  description: One sentence per missing package or version, naming what the repository offers instead.
  returned: always
  type: str
resolved:
  description: Name -> the repository's full version string to install (only found packages).
  returned: always
  type: dict
  sample: {"cuda-drivers-535": "535.104.05-1"}
packages:
  description: Per request, C(name), C(wanted), C(match), C(found), C(version), C(offered), C(candidates), C(problem).
  returned: always
  type: list
  elements: dict
missing:
  description: The entries of C(packages) that were not found.
  returned: always
  type: list
  elements: dict
installed:
  description: Name -> installed version where the query reports one (apt only).
  returned: always
  type: dict
manager:
  description: The package manager that was asked.
  returned: always
  type: str
"""

import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils import pkg_repo
from ansible_collections.gpufleet.cluster.plugins.module_utils import versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool


def _run(module, argv, timeout):
    rc, out, err, timed_out = run_tool(module, argv, timeout, environ_update=C_LOCALE)
    if timed_out:
        module.fail_json(msg=f"{' '.join(argv)} did not answer within {timeout}s (repo_packages_info timeout)",
                         rc=rc, stdout=out, stderr=err)
    return rc, out, err


def ask_apt(module, requests, timeout):
    names = [r["name"] for r in requests]
    rc, out, err = _run(module, ["apt-cache", "policy"] + names, timeout)
    if rc != 0:
        module.fail_json(msg=f"apt-cache policy failed (rc {rc})", rc=rc, stdout=out, stderr=err)
    policy = pkg_repo.parse_apt_policy(out)
    offered = pkg_repo.apt_offered(policy)
    all_names = []
    if any(r["name"] not in offered for r in requests):
        rc, out, err = _run(module, ["apt-cache", "pkgnames"], timeout)
        all_names = out.split() if rc == 0 else []
    installed = {n: e["installed"] for n, e in policy.items() if e["installed"]}
    return offered, all_names, installed


def ask_dnf(module, requests, timeout):
    names = [r["name"] for r in requests if not r["name"].startswith("@")]
    listing = {}
    if names:
        # rc 1 with "No matching Packages" when none of the names exist: that is an answer, not a failure.
        rc, out, err = _run(module, ["dnf", "-q", "list", "--showduplicates"] + names, timeout)
        if rc not in (0, 1):
            module.fail_json(msg=f"dnf list failed (rc {rc})", rc=rc, stdout=out, stderr=err)
        listing = pkg_repo.parse_dnf_list(out)
    modules = {}
    for spec in sorted({r["name"][1:].split(":")[0] for r in requests if r["name"].startswith("@")}):
        rc, out, err = _run(module, ["dnf", "-q", "module", "list", spec], timeout)
        modules.update(pkg_repo.parse_dnf_module_list(out) if rc == 0 else {})
    offered = pkg_repo.dnf_offered(listing, modules)
    all_names = list(offered)
    for request in requests:
        if request["name"] in offered or request["name"].startswith("@"):
            continue
        glob = request["name"].split("-")[0] + "*"
        rc, out, err = _run(module, ["dnf", "-q", "list", "--available", glob], timeout)
        all_names += list(pkg_repo.parse_dnf_list(out)) if rc == 0 else []
    return offered, all_names, {}


def main():
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "dict", "required": True, "options": {
                "name": {"type": "str", "required": True},
                "version": {"type": "str", "default": ""},
                "match": {"type": "str", "choices": ["upstream", "exact", "any"], "default": "upstream"},
            }},
            "manager": {"type": "str", "choices": ["auto", "apt", "dnf"], "default": "auto"},
            "timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    requests = []
    for item in module.params["packages"]:
        match = item["match"]
        if item["name"].startswith("@") or not item["version"]:
            match = "any"
        requests.append({"name": item["name"], "version": item["version"], "match": match})
    manager = module.params["manager"]
    if manager == "auto":
        manager = "apt" if shutil.which("apt-cache") else ("dnf" if shutil.which("dnf") else "")
    if not manager or not shutil.which("apt-cache" if manager == "apt" else "dnf"):
        module.fail_json(msg="neither apt-cache nor dnf is on this node; the repository cannot be asked")
    ask = ask_apt if manager == "apt" else ask_dnf
    offered, all_names, installed = ask(module, requests, module.params["timeout"])
    try:
        result = pkg_repo.check_requests(requests, offered, all_names, scheme="deb" if manager == "apt" else "rpm")
    except versions.VersionError as exc:
        module.fail_json(msg=f"{manager} reported a version its own rules cannot read: {exc}")
    module.exit_json(changed=False, manager=manager, installed=installed, **result)


if __name__ == "__main__":
    main()
