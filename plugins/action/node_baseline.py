# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Controller side of the per-node baselines: read each node's stored baseline, judge this run against
it, store new ones. Runs in the controller process; documentation in plugins/modules/node_baseline.py,
the rules in module_utils/node_baseline.py."""

from __future__ import annotations

import json
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cluster.plugins.module_utils import node_baseline as nb

_ARGS = {
    "kind": {"type": "str", "required": True, "choices": list(nb.KINDS)},
    "cluster": {"type": "str", "required": True},
    "result": {"type": "raw", "required": True},
    "facts": {"type": "dict", "default": {}},
    "baseline_dir": {"type": "path", "required": True},
    "tolerance": {"type": "float", "default": 0.10},
    "store": {"type": "bool", "default": False},
    "failed_nodes": {"type": "list", "elements": "str", "default": []},
    "recorded_at": {"type": "str", "default": None},
}


def _read(path):
    """The file's text, None when there is none, or {"error": why} when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return {"error": "%s cannot be read: %s" % (path, to_native(exc))}


def _write(path, text):
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".node-baseline-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=_ARGS)
        kind = args["kind"]
        try:
            current = nb.current_metrics(kind, args["result"], args["facts"])
        except ValueError as exc:
            raise AnsibleActionFail("node_baseline: %s" % exc)
        folder = os.path.join(args["baseline_dir"], "nodes")
        paths = {node: os.path.join(folder, nb.baseline_filename(args["cluster"], node, kind)) for node in current}
        texts = {node: _read(path) for node, path in paths.items()}
        verdict = nb.node_verdict(kind, args["cluster"], current, texts, args["tolerance"], args["store"],
                                  args["recorded_at"], set(args["failed_nodes"]))
        stored = []
        try:
            for node, document in sorted(verdict["to_store"].items()):
                _write(paths[node], json.dumps(document, indent=2, sort_keys=True) + "\n")
                stored.append(paths[node])
        except OSError as exc:
            raise AnsibleActionFail("node_baseline: cannot write %s: %s" % (folder, to_native(exc)))
        return {"changed": bool(stored), "kind": kind, "current": current, "files": paths, "stored": stored,
                "findings": verdict["findings"], "comparisons": verdict["comparisons"],
                "not_checked": verdict["not_checked"]}
