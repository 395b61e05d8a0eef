# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The stack's converged-state record, in one place: the key (on the controller, from the roles'
argument specs and code, plugin_utils/stack_key.py), the probe and the record (on the node, through the
stack_state module), and the skip decision (the probe's ``converged``). Documentation in
plugins/modules/stack_record.py."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cluster.plugins.plugin_utils import stack_key

try:  # ansible-core 2.19+: only trusted strings are templated
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core templates every string
    def trust_as_template(value):
        return value

_ARGS = {
    "roles": {"type": "list", "elements": "str", "default": []},
    "full": {"type": "bool", "default": False},
    "probe": {"type": "dict"},
    "watch": {"type": "dict", "default": {}},
    "installed": {"type": "dict", "default": {}},
    "path": {"type": "path", "default": "/var/lib/gpufleet/stack-state.json"},
    "timeout": {"type": "int", "default": 60},
}
# The code this action runs besides the roles': a new record format or probe is a new key.
_OWN_PLUGINS = ("stack_record",)
_UNSET = "(unset)"


def _trusted(value):
    """A role default as Ansible would read it from the role: its templates are templated."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=_ARGS)
        task_vars = task_vars or {}
        if args["probe"] is None:
            return self._probe(args, task_vars)
        return self._record(args, task_vars)

    def _resolver(self, task_vars, unresolved):
        """resolve(variable, role_defaults, role_internals): the value the role would see for one of its
        variables; the names that cannot be templated here go to unresolved (and key by their expression)."""
        # One templar per role: its defaults may read each other and its vars/main.yml; task_vars come first.
        last = {"defaults": None, "templar": None}

        def resolve(name, defaults, internals):
            if name in task_vars:
                templar, raw = self._templar, task_vars[name]
            elif name in defaults:
                if last["defaults"] is not defaults:
                    last.update(defaults=defaults, templar=self._templar.copy_with_new_env(
                        available_variables={**_trusted(internals), **_trusted(defaults), **task_vars}))
                templar, raw = last["templar"], _trusted(defaults[name])
            else:
                return _UNSET
            try:
                return templar.template(raw)
            except AnsibleError as exc:
                unresolved.append(name)
                return "(unresolved: %s) %s" % (type(exc).__name__, raw)
        return resolve

    def _locate(self, path):
        """A controller file as the roles' lookup('file') and copy find it (the playbook's files/ and directory)."""
        try:
            return self._find_needle("files", path)
        except AnsibleError:
            return path  # not found: its digest says unreadable, as the role would fail to read it

    def _play_file(self):
        """The playbook (or task file) holding the probe: which roles run and how is decided there."""
        path = self._task.get_path().rpartition(":")[0]
        return path or None

    def _probe(self, args, task_vars):
        roles = args["roles"]
        if not roles:
            raise AnsibleActionFail("stack_record: name the stack roles (roles: [nvidia_driver, ...]) to probe for")
        unresolved = []
        try:
            parts = stack_key.key_parts(roles, self._resolver(task_vars, unresolved), extra_names=_OWN_PLUGINS,
                                        locate=self._locate, play=self._play_file())
        except stack_key.StackKeyError as exc:
            raise AnsibleActionFail("stack_record: cannot build the record's key: %s" % exc) from exc
        result = {"changed": False, "roles": roles, "key": stack_key.key_of(parts), "key_parts": parts,
                  "unresolved": unresolved}
        if args["full"]:
            result.update(converged=False, drift=[], installed={}, observed=0,
                          reason="asked to run the roles whatever the record says (full)")
            return result
        node = self._execute_module(module_name="gpufleet.cluster.stack_state", task_vars=task_vars, module_args={
            "path": args["path"], "key": result["key"], "key_parts": parts, "timeout": args["timeout"]})
        if node.get("failed"):
            return node
        result.update((name, node.get(name, default)) for name, default in (
            ("converged", False), ("reason", ""), ("drift", []), ("installed", {}), ("observed", 0)))
        return result

    def _record(self, args, task_vars):
        probe = args["probe"]
        if not probe.get("key") or not probe.get("roles"):
            raise AnsibleActionFail("stack_record: probe must be the registered result of this node's probe "
                                    "(stack_record with roles:), got one without key or roles")
        watch = {}
        for role in probe["roles"] + [None]:
            part = args["watch"] if role is None else self._role_watch(role, task_vars)
            for kind, items in part.items():
                watch[kind] = watch.get(kind, []) + list(items)
        node = self._execute_module(module_name="gpufleet.cluster.stack_state", task_vars=task_vars, module_args={
            "path": args["path"], "key": probe["key"], "key_parts": probe["key_parts"], "record": True,
            "watch": watch, "installed": args["installed"], "timeout": args["timeout"]})
        # A memo of this run's verification, like the torch import's, not state the play manages.
        node["changed"] = False
        return node

    def _role_watch(self, role, task_vars):
        """What the role manages: each stack role names it in <role>_watch (its vars/main.yml)."""
        name = "%s_watch" % role
        if name not in task_vars:
            raise AnsibleActionFail("stack_record: the role %s set no %s on %s: record only a node on which every "
                                    "stack role ran" % (role, name, task_vars.get("inventory_hostname", "?")))
        watch = self._templar.template(task_vars[name])
        if not isinstance(watch, dict):
            raise AnsibleActionFail("stack_record: %s must be a dict of watch kinds, got %r" % (name, watch))
        return watch
