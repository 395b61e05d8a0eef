#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wheel_index_info
short_description: Ask a wheel index or a wheel directory whether it holds the planned wheels for this node
version_added: "0.5.0"
description:
  - For each planned package (C(torch), C(torchvision), C(torchaudio) at their versions with the variant's local
    label, C(2.1.2+cu121)), reads the index's PEP 503 project page (C(<index>/<name>/)) or lists O(wheel_dir), and
    says whether a wheel of that version fits the node's interpreter (O(python)) and machine.
  - A missing wheel is named with what the index offers instead (the versions of the same variant that fit the node,
    or the interpreters the version exists for). Nothing is downloaded or installed.
  - The index URL is read from O(index_url), else the C(PIP_INDEX_URL) environment variable (how the pytorch role
    hands pip a URL that may carry credentials, so it stays off the command line), else PyPI. Credentials in it are
    sent as HTTP basic authentication and never returned.
options:
  packages:
    description: The planned wheels, each C({name, version}).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Distribution name.
        type: str
        required: true
      version:
        description: Exact version, with its local label where the variant has one (C(2.1.2+cu121), C(2.13.0+cpu)).
        type: str
        required: true
  wheel_dir:
    description: A directory of wheels on the node (pip's C(--find-links)); when set, the index is not asked.
    type: path
  index_url:
    description: A PEP 503 simple index (or a mirror of one); empty reads C(PIP_INDEX_URL), then PyPI's.
    type: str
    default: ""
  python:
    description: The interpreter that will install the wheels; its CPython tag and machine decide which wheels fit.
    type: path
    default: /usr/bin/python3
  timeout:
    description: Seconds each page or command may take.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.cluster.read_only
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Ask the torch index for the planned wheels
  gpufleet.cluster.wheel_index_info:
    packages:
      - {name: torch, version: 2.1.2+cu121}
      - {name: torchvision, version: 0.16.2+cu121}
  environment:
    PIP_INDEX_URL: https://download.pytorch.org/whl/cu121
  register: wheels
"""

RETURN = r"""
ok:
  description: True when every planned wheel is there for this node.
  returned: always
  type: bool
found:
  description: Package name -> the wheel file that fits.
  returned: always
  type: dict
missing:
  description: Per missing wheel, C(name), C(version) and C(problem).
  returned: always
  type: list
  elements: dict
message:
  description: One sentence per missing wheel, naming what the index offers instead.
  returned: always
  type: str
index:
  description: The index or directory asked (without credentials).
  returned: always
  type: str
python_tag:
  description: The interpreter's CPython tag (C(cp311)).
  returned: always
  type: str
machine:
  description: The node's machine (C(x86_64), C(aarch64)).
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.gpufleet.cluster.plugins.module_utils import wheel_index
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool

PYPI = "https://pypi.org/simple"
TAG_PROBE = "import platform, sys; print('cp%d%d %s' % (sys.version_info[0], sys.version_info[1], platform.machine()))"


def _interpreter(module, python, timeout):
    rc, out, err, timed_out = run_tool(module, [python, "-c", TAG_PROBE], timeout, environ_update=C_LOCALE)
    if timed_out or rc != 0 or len(out.split()) != 2:
        module.fail_json(msg=f"{python} could not say its version and machine (rc {rc}): {err.strip() or out.strip()}; "
                             "set pytorch_python to the interpreter that creates the venv")
    return out.split()


def _directory_files(module, directory, names):
    if not os.path.isdir(directory):
        module.fail_json(msg=f"the wheel directory {directory} does not exist on this node")
    listing = os.listdir(directory)
    files = {}
    for filename in listing:
        wheel = wheel_index.parse_wheel_name(filename)
        if wheel and wheel["name"] in names:
            files.setdefault(wheel["name"], []).append(filename)
    return files


def _index_files(module, index, names, timeout):
    files = {}
    for name in names:
        url = f"{index.rstrip('/')}/{name}/"
        try:
            page = open_url(url, headers={"Accept": "text/html"}, timeout=timeout, follow_redirects="safe").read()
        except Exception as exc:  # pylint: disable=broad-except  # HTTPError 404: no page; anything else: unreachable
            if getattr(exc, "code", None) == 404:
                continue
            module.fail_json(msg=f"the wheel index {wheel_index.public_url(index)} could not be read for {name}: "
                                 f"{wheel_index.public_url(str(exc))}")
        files[name] = wheel_index.parse_simple_index(page.decode("utf-8", errors="replace"))
    return files


def main():
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "dict", "required": True, "options": {
                "name": {"type": "str", "required": True},
                "version": {"type": "str", "required": True},
            }},
            "wheel_dir": {"type": "path"},
            "index_url": {"type": "str", "default": "", "no_log": True},
            "python": {"type": "path", "default": "/usr/bin/python3"},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    params = module.params
    python_tag, machine = _interpreter(module, params["python"], params["timeout"])
    names = sorted({wheel_index.normalize(p["name"]) for p in params["packages"]})
    if params["wheel_dir"]:
        where = f"the wheel directory {params['wheel_dir']}"
        files = _directory_files(module, params["wheel_dir"], names)
        # A directory lists what it has: a name without wheels is a name it does not have.
        files = {n: files.get(n, []) for n in names}
        shown = params["wheel_dir"]
    else:
        index = params["index_url"] or os.environ.get("PIP_INDEX_URL") or PYPI
        shown = wheel_index.public_url(index)
        where = f"the wheel index {shown}"
        files = _index_files(module, index, names, params["timeout"])
    result = wheel_index.check_wheels(params["packages"], files, python_tag, machine, where)
    module.exit_json(changed=False, index=shown, python_tag=python_tag, machine=machine, **result)


if __name__ == "__main__":
    main()
