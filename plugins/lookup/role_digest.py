# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: role_digest
short_description: One digest over the files of this collection's roles
version_added: "0.3.0"
description:
  - Returns a SHA-256 over the path and content of every file below each named role of the
    gpufleet.cluster collection (tasks, defaults, vars, templates, files, handlers, meta).
  - The stack playbook puts it into the key of a node's recorded converged state, so a node
    converged by other role code runs the roles again instead of skipping them.
options:
  _terms:
    description: Role names (without the collection prefix).
    required: true
    type: list
    elements: str
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Show the digest of the stack roles
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.cluster.role_digest', 'nvidia_driver', 'cuda_toolkit', 'nccl', 'pytorch') }}"
"""

RETURN = r"""
_raw:
  description: One hex digest over all the named roles.
  type: list
  elements: str
"""

import hashlib
import os

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

# plugins/lookup/role_digest.py -> the collection root, where roles/ lies (also inside the wheel).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def roles_digest(names, root=COLLECTION_ROOT):
    digest = hashlib.sha256()
    for name in names:
        role_dir = os.path.join(root, "roles", name)
        if not os.path.isdir(role_dir):
            raise AnsibleError("role_digest: no role %r in %s" % (name, os.path.join(root, "roles")))
        for top, dirs, files in os.walk(role_dir):
            dirs.sort()
            for file_name in sorted(files):
                path = os.path.join(top, file_name)
                digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


class LookupModule(LookupBase):  # pylint: disable=too-few-public-methods
    def run(self, terms, variables=None, **kwargs):
        return [roles_digest([str(term) for term in terms])]
