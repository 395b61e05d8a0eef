#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stack_state
short_description: Compare a node with the GPU stack state recorded after its last converge, or record it
version_added: "0.3.0"
description:
  - With C(record=false) (the default) reads the record at O(path), observes again everything the
    record watches (files and links, directory listings, package versions and holds, services,
    virtual environments, read-only commands such as C(nvidia-smi -L)), and reports whether the node
    is still as recorded. The node counts as converged only when the record exists, its key equals
    O(key), and every observation is unchanged; anything that could not be observed counts as drift.
  - With C(record=true) observes what O(watch) names and writes the record with O(key) and
    O(installed). The record holds no time stamp, so re-recording an unchanged node changes nothing.
  - The node side of M(gpufleet.cluster.stack_record), which builds the key and decides; a converged node
    skips the stack roles in one round trip, and runs them all as soon as anything they manage moved.
options:
  path:
    description: Where the record lives on the node.
    type: path
    default: /var/lib/gpufleet/stack-state.json
  key:
    description:
      - Digest of everything the converge depended on besides the node (the roles' declared variables,
        the code they run; see M(gpufleet.cluster.stack_record)). A record under another key is not converged.
    type: str
    required: true
  key_parts:
    description:
      - What O(key) was computed from, by part; stored with the record, so that a key that changed is
        reported by the parts (the variables of C(inputs), the files of C(code)) that changed.
    type: dict
    default: {}
  record:
    description: Write the record instead of comparing with it.
    type: bool
    default: false
  watch:
    description:
      - What to observe; used with O(record=true) (a comparison watches what the record names).
      - Keys C(files) (paths; links are followed link by link), C(dirs) (listings with each file's
        content), C(packages) (names, through dpkg-query or rpm), C(services) (systemd unit names
        without C(.service)), C(venvs) (trees, every file's path, size, mtime and mode) and
        C(commands) (argv lists of read-only commands).
    type: dict
    default: {}
  installed:
    description: What the roles reported for the converged node; stored with the record and returned by a comparison.
    type: dict
    default: {}
  timeout:
    description:
      - Seconds each command the module runs (C(nvidia-smi -L), the package query, C(find) over the venv)
        may take. A command past it is killed and counts as not observed, naming the command and the limit
        (a comparison then reports drift; a record fails).
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: A comparison only reads. A record is not written in check mode; the result says whether it would change.
  diff_mode:
    support: none
    description: The drift list names what moved instead.
seealso:
  - module: gpufleet.cluster.stack_record
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Compare the node with its last converged state
  gpufleet.cluster.stack_state:
    key: "{{ plan_digest }}"
  register: state

- name: Record the converged state
  gpufleet.cluster.stack_state:
    key: "{{ plan_digest }}"
    record: true
    watch:
      files: [/etc/apt/preferences.d/gpufleet-nccl]
      packages: [libnccl2]
      services: [nvidia-persistenced]
      commands: [[nvidia-smi, -L]]
    installed:
      nccl: 2.18.3
"""

RETURN = r"""
converged:
  description: True when the record exists under O(key) and nothing it watches moved (comparison only).
  returned: always
  type: bool
reason:
  description: Why the node is not converged, in one line; empty when it is.
  returned: always
  type: str
drift:
  description: One line per observation that moved, with the recorded and the current value.
  returned: always
  type: list
  elements: str
installed:
  description: What the record stored for the converged node (comparison), or what was recorded.
  returned: always
  type: dict
observed:
  description: How many observations were taken.
  returned: always
  type: int
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_state import (
    UNOBSERVED, CommandTimedOut, drift, normalise_watch, observe)

RECORD_FORMAT = 1


def read_record(path: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), ""
    except FileNotFoundError:
        return None, "no converged state recorded yet (%s)" % path
    except (OSError, ValueError) as exc:
        return None, "the record %s is unreadable (%s)" % (path, exc)


def changed_parts(recorded: dict, now: dict) -> list:
    """Names of the key's parts that differ; inside a dict part (the role inputs), the names that differ."""
    out = []
    for part in sorted(set(recorded) | set(now)):
        before, after = recorded.get(part), now.get(part)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            out.extend("%s.%s" % (part, name) for name in sorted(set(before) | set(after))
                       if before.get(name) != after.get(name))
        else:
            out.append(part)
    return out


def compare(module: AnsibleModule, run_command) -> dict:
    record, problem = read_record(module.params["path"])
    if record is None:
        return {"converged": False, "reason": problem, "drift": [], "installed": {}, "observed": 0}
    if record.get("format") != RECORD_FORMAT or not isinstance(record.get("observed"), dict):
        return {"converged": False, "reason": "the record %s has another format" % module.params["path"],
                "drift": [], "installed": {}, "observed": 0}
    if record.get("key") != module.params["key"]:
        parts = changed_parts(record.get("key_parts") or {}, module.params["key_parts"])
        return {"converged": False,
                "reason": "the roles' variables or code changed since the record%s" % (
                    ": " + ", ".join(parts) if parts else ""),
                "drift": [], "installed": record.get("installed", {}), "observed": 0}
    now = observe(record.get("watch", {}), run_command)
    moved = drift(record["observed"], now)
    reason = "" if not moved else "%d observation(s) moved since the record: %s" % (len(moved), moved[0])
    return {"converged": not moved, "reason": reason, "drift": moved,
            "installed": record.get("installed", {}), "observed": len(now)}


def write_record(module: AnsibleModule, run_command) -> dict:
    watch = normalise_watch(module.params["watch"])
    now = observe(watch, run_command)
    unobserved = [what for what, value in now.items() if value.startswith(UNOBSERVED)]
    if unobserved:
        # A record of what could not be seen would let the next run skip on nothing.
        module.fail_json(msg="cannot record the converged state: could not observe %s" % "; ".join(
            "%s (%s)" % (what, now[what]) for what in unobserved))
    content = json.dumps({"format": RECORD_FORMAT, "key": module.params["key"],
                          "key_parts": module.params["key_parts"], "watch": watch,
                          "observed": now, "installed": module.params["installed"]},
                         indent=1, sort_keys=True) + "\n"
    path = module.params["path"]
    try:
        with open(path, encoding="utf-8") as handle:
            changed = handle.read() != content
    except OSError:
        changed = True
    if changed and not module.check_mode:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        temp = "%s.tmp.%d" % (path, os.getpid())
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    return {"changed": changed, "converged": True, "reason": "", "drift": [],
            "installed": module.params["installed"], "observed": len(now)}


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/var/lib/gpufleet/stack-state.json"},
            "key": {"type": "str", "required": True, "no_log": False},
            "key_parts": {"type": "dict", "default": {}, "no_log": False},
            "record": {"type": "bool", "default": False},
            "watch": {"type": "dict", "default": {}},
            "installed": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    timeout = module.params["timeout"]
    if timeout <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % timeout)

    def run_command(argv):
        rc, out, err, timed_out = run_tool(module, argv, timeout, environ_update=C_LOCALE)
        if timed_out:
            raise CommandTimedOut("%s did not answer within %ds (stack_state timeout)" % (" ".join(argv), timeout))
        return rc, out, err

    if module.params["record"]:
        module.exit_json(**write_record(module, run_command))
    module.exit_json(changed=False, **compare(module, run_command))


if __name__ == "__main__":
    main()
