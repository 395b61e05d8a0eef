#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: signing_key_info
short_description: Judge a downloaded repository signing key against a pinned fingerprint
version_added: "0.2.0"
description:
  - Reads an OpenPGP key file with C(gpg --batch --with-colons --show-keys) (nothing is imported)
    and accepts it only when it holds exactly one primary key, that key's fingerprint equals
    the pin, and the key is neither revoked nor expired. Subkeys of that key are allowed; a second
    primary key, even beside the pinned one, is refused, so trusting the file can never trust
    anything but the pinned key.
  - Read-only on the node too. gpg runs with a private home directory made for the call and removed
    after it, so nothing is written to C(~/.gnupg) or any keyring.
  - The caller moves the file into place only after this module accepts it.
options:
  path:
    description: The key file on the node (ASCII-armored or binary).
    type: path
    required: true
  fingerprint:
    description: The pinned fingerprint (40 hex digits; spaces and case are ignored).
    type: str
    required: true
  timeout:
    description: Seconds gpg may run; past them the module fails, naming the file and the limit.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.cluster.read_only
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Judge the downloaded key
  gpufleet.cluster.signing_key_info:
    path: /tmp/cuda-key.asc
    fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
  register: key

- name: Refuse anything but the pinned key
  ansible.builtin.assert:
    that: key.ok
    fail_msg: "{{ inventory_hostname }}: {{ key.reason }}"
"""

RETURN = r"""
ok:
  description: True when the file holds exactly one primary key, it is the pinned one, and it is neither revoked nor expired.
  returned: always
  type: bool
fingerprints:
  description: Fingerprints of the primary keys in the file, in file order.
  returned: always
  type: list
  elements: str
reason:
  description: Why the file was refused; empty when accepted.
  returned: always
  type: str
"""

import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils import pkg_repo
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool


def show_keys(module, gpg: str, path: str, timeout: int):
    """``gpg --show-keys`` in a home directory of its own: gpg creates a keybox and a trust database in
    its home even to only show a file, and the node's ~/.gnupg is not ours to write."""
    home = tempfile.mkdtemp(prefix="gpufleet-gpg-")
    try:
        argv = [gpg, "--homedir", home, "--batch", "--no-options", "--no-autostart", "--with-colons",
                "--show-keys", path]
        return run_tool(module, argv, timeout, environ_update={**C_LOCALE, "GNUPGHOME": home})
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True},
                       "fingerprint": {"type": "str", "required": True},
                       "timeout": {"type": "int", "default": 60}},
        supports_check_mode=True,
    )
    gpg = module.get_bin_path("gpg")
    if not gpg:
        module.fail_json(msg="gpg is not installed on this node; the signing key cannot be checked (install gnupg)")
    path, timeout = module.params["path"], module.params["timeout"]
    rc, out, err, timed_out = show_keys(module, gpg, path, timeout)
    if timed_out:
        module.fail_json(msg=f"gpg --show-keys {path} did not answer within {timeout}s (signing_key_info timeout)")
    verdict = pkg_repo.check_signing_key(out if rc == 0 else "", module.params["fingerprint"])
    if rc != 0 and not verdict["fingerprints"]:
        verdict["reason"] = f"gpg could not read {path} as an OpenPGP key (rc {rc}): {err.strip()}"
    module.exit_json(changed=False, **verdict)


if __name__ == "__main__":
    main()
