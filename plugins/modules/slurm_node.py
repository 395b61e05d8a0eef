#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Read a node's state in Slurm, drain it with a reason, or resume only the drain gpufleet made
version_added: "0.5.0"
description:
  - Runs C(scontrol show node NAME) on the node and returns its state, flags and drain reason, parsed by the
    collection's one Slurm parser (both of scontrol's layouts, Slurm 2.x to 25.x).
  - With O(state=drained), drains the node (C(scontrol update State=DRAIN Reason=...)) unless it is drained
    already; an existing drain keeps its reason, whoever set it.
  - With O(state=resumed), resumes the node (C(State=RESUME)) only while Slurm still shows the drain gpufleet
    made, with the reason O(reason) or the one recorded in O(record); a node an operator drained since, with a
    reason of their own, stays drained, and the record is forgotten.
options:
  name:
    description: The node's name in Slurm, one node; a host-list expression (C(gpu[01-02]), C(gpu01,gpu02), whitespace) is refused.
    type: str
    required: true
  state:
    description:
      - C(query) only reads. C(drained) drains the node with O(reason). C(resumed) resumes the drain gpufleet made.
    type: str
    choices: [query, drained, resumed]
    default: query
  reason:
    description:
      - With O(state=drained), the drain reason to set (required).
      - With O(state=resumed) and no O(record), the reason of the drain to resume; any other drain stays.
    type: str
  record:
    description:
      - A file on the node that records the drain gpufleet made (its reason). O(state=drained) writes it when it
        drains; O(state=resumed) resumes only a drain with the recorded reason, and forgets the record once the
        drain is resumed or is no longer gpufleet's.
    type: path
  scontrol:
    description: Path or name of scontrol.
    type: str
    default: scontrol
  timeout:
    description:
      - Seconds each scontrol call may take. One past it is killed; a query then reports the node as not found
        (naming the command and the limit), a change fails.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: Reads the state and says what it would change; runs no C(scontrol update) and writes no record.
  diff_mode:
    support: none
    description: The message says what changed.
notes:
  - O(state=query) does not fail when scontrol fails or does not know the node, since a node Slurm does not manage
    is a state, not an error. RV(found) is then false and RV(message) says why. A drain or resume fails instead.
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read the node's state in Slurm
  gpufleet.cluster.slurm_node:
    name: "{{ inventory_hostname_short }}"
  register: slurm

- name: Drain the node because it failed its health checks
  gpufleet.cluster.slurm_node:
    name: "{{ inventory_hostname_short }}"
    state: drained
    reason: "gpufleet: ECC_UNCORRECTABLE_VOLATILE"
    record: /var/lib/gpufleet/slurm-drained-by-gpufleet

- name: Resume it once it is healthy, if the drain is still gpufleet's
  gpufleet.cluster.slurm_node:
    name: "{{ inventory_hostname_short }}"
    state: resumed
    record: /var/lib/gpufleet/slurm-drained-by-gpufleet
"""

RETURN = r"""
found:
  description: Whether scontrol answered and listed the node.
  returned: always
  type: bool
node:
  description:
    - What Slurm showed before any change; empty when not found. Keys C(name), C(state) (as printed),
      C(base_state), C(flags), C(not_responding), C(drain_flag) (no new jobs), C(drained) (drain flag and no
      job left, idle or down), C(reason) (without its C([user@time])), C(reason_user), C(reason_time) and
      C(fields) (every field as printed).
  returned: always
  type: dict
action:
  description: C(drain), C(resume), or empty when Slurm was left as it was.
  returned: always
  type: str
record:
  description:
    - C(write) when the drain was recorded in O(record), C(forget) when the record was dropped (the drain was
      resumed, or Slurm no longer shows it), else empty.
  returned: always
  type: str
message:
  description: What was done or why not; for a query that found no node, the command, its rc and its output.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils import slurm
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool


def runner(module):
    """``run(argv) -> (rc, stdout, stderr)`` with the module's deadline; a killed call says so in stderr."""
    timeout = module.params["timeout"]

    def run(argv):
        rc, out, err, timed_out = run_tool(module, argv, timeout)
        if timed_out:
            err = "did not answer within %ds (timeout) %s" % (timeout, err)
        return rc, out, err
    return run


def query(module, run):
    name = module.params["name"]
    try:
        node = slurm.show_node(run, module.params["scontrol"], name)
    except slurm.SlurmError as exc:
        module.exit_json(changed=False, found=False, node={}, action="", record="", message=str(exc))
    message = "" if node else "%s show node %s did not list the node" % (module.params["scontrol"], name)
    module.exit_json(changed=False, found=node is not None, node=node or {}, action="", record="", message=message)


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["query", "drained", "resumed"], "default": "query"},
            "reason": {"type": "str"},
            "record": {"type": "path"},
            "scontrol": {"type": "str", "default": "scontrol"},
            "timeout": {"type": "int", "default": 60},
        },
        required_if=[("state", "drained", ["reason"]), ("state", "resumed", ["reason", "record"], True)],
        supports_check_mode=True,
    )
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % params["timeout"])
    reason = params["reason"]
    if reason is not None and (not reason.strip() or "\n" in reason or "\r" in reason):
        module.fail_json(msg="reason must be one line of text, got %r" % params["reason"])
    try:
        slurm.check_node_name(params["name"])
    except slurm.SlurmError as exc:
        module.fail_json(msg="name: %s" % exc)
    run = runner(module)
    if params["state"] == "query":
        query(module, run)
    try:
        result = slurm.converge(run, params["scontrol"], params["name"], params["state"], reason=params["reason"],
                                record_path=params["record"], check_mode=module.check_mode)
    except (slurm.SlurmError, OSError) as exc:
        module.fail_json(msg="%s: %s" % (params["name"], exc))
    module.exit_json(changed=result["changed"], found=result["node"] is not None, node=result["node"] or {},
                     action=result["action"] or "", record=result["record"] or "", message=result["message"])


if __name__ == "__main__":
    main()
