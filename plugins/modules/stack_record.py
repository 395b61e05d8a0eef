# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Documentation for the stack_record action (the work happens in plugins/action/stack_record.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stack_record
short_description: The GPU stack's converged-state record - key, probe, skip decision and record in one place
version_added: "0.4.0"
description:
  - An action plugin. With O(roles) (the probe) it builds on the controller the key of everything the
    stack roles' behaviour depends on besides the node, then compares the node with the record of its
    last converge through M(gpufleet.cluster.stack_state), in one round trip. RV(converged) is the skip
    decision - the only one - the playbook reads.
  - "The key is derived from the roles, never from a list: every variable each role declares in
    C(meta/argument_specs.yml) at the value the role would see (inventory, play and extra vars, else
    the role's default templated), the content of a controller file a role reads through one of them
    (a lock file), and the code the roles run - every file of each role and of each role it includes,
    every collection plugin their files name (modules, action plugins, lookups, filters) with the
    module_utils and plugin_utils those import, this action's own code, and the playbook holding the probe
    with every task file it includes or imports (which roles run and how). Values go in by SHA-256
    only, so credentials in them (a proxy, a token in an index URL) stay out of the record and the logs."
  - With O(probe) (the record) it writes, on a node where every stack role ran and passed, what the
    roles manage - each role names it in C(<role>_watch) - under the probe's key. The next probe
    finds the node converged only while the key and every observation are unchanged.
options:
  roles:
    description: The stack roles, in collection order; probe only.
    type: list
    elements: str
    default: []
  full:
    description: Report the node as not converged without asking it, so the roles run (C(gpufleet_stack_full)).
    type: bool
    default: false
  probe:
    description:
      - The registered result of this node's probe; giving it records instead of probing. The record is
        written under the probe's key, so what the roles ran with is what it vouches for.
    type: dict
  watch:
    description: What to watch besides the roles' C(<role>_watch) (a file the caller writes); record only.
    type: dict
    default: {}
  installed:
    description: What the roles reported for the node; stored with the record and returned by the next probe.
    type: dict
    default: {}
  path:
    description: Where the record lives on the node.
    type: path
    default: /var/lib/gpufleet/stack-state.json
  timeout:
    description: Seconds each command the node-side observation runs may take.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: The probe only reads. The record is not written in check mode.
  diff_mode:
    support: none
    description: RV(drift) names what moved instead.
  platform:
    support: full
    platforms: posix
    description: The key is built on the controller; the probe and the record run on the node.
seealso:
  - module: gpufleet.cluster.stack_state
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Compare the node with its last converged state
  gpufleet.cluster.stack_record:
    roles: [nvidia_driver, cuda_toolkit, nccl, pytorch]
    full: "{{ gpufleet_stack_full | default(false) }}"
  register: stack_record

- name: Run the stack roles
  ansible.builtin.include_tasks: tasks/gpu_stack_roles.yml
  when: not stack_record.converged

- name: Record the converged state for the next run
  gpufleet.cluster.stack_record:
    probe: "{{ stack_record }}"
    installed: "{{ installed_versions }}"
  when: not reboot_required | default(false) | bool
"""

RETURN = r"""
converged:
  description: True when the node's record is under this key and nothing it watches moved (probe).
  returned: always
  type: bool
reason:
  description: Why the node is not converged, in one line (the key's changed parts by name); empty when it is.
  returned: always
  type: str
drift:
  description: One line per observation that moved, with the recorded and the current value.
  returned: always
  type: list
  elements: str
installed:
  description: What the record stored for the node (probe), or what was recorded.
  returned: always
  type: dict
key:
  description: SHA-256 of RV(key_parts) (probe).
  returned: probe
  type: str
key_parts:
  description: C(inputs) (each role variable's digest) and C(code) (each file's digest).
  returned: probe
  type: dict
unresolved:
  description:
    - The role variables whose value could not be templated before the roles ran (an undefined variable);
      each is keyed by its expression instead. The role would meet the same error.
  returned: probe
  type: list
  elements: str
roles:
  description: The roles probed for.
  returned: probe
  type: list
  elements: str
observed:
  description: How many observations the node took.
  returned: always
  type: int
"""
