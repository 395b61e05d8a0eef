# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision as _decision

_NODE_KEYS = ("current", "installed", "held", "previous", "branch_packages")
_PLAN_KEYS = ("branch", "version", "kernel_modules", "packages")


def _mapping(value, what, keys):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"driver_decision: {what} must be a mapping, got {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise AnsibleFilterError(f"driver_decision: {what} lacks {', '.join(missing)}")
    return value


def driver_decision(node, plan, repository=None, check_mode=False, sources_changed=False, host=""):
    """nvidia_driver_info's result, the plan and the repository's answer -> the decision."""
    node = _mapping(node, "the node (nvidia_driver_info's result)", _NODE_KEYS)
    plan = _mapping(plan, "the plan", _PLAN_KEYS)
    if repository is not None:
        repository = _mapping(repository, "the repository answer (repo_packages_info's result)", ("ok",))
    return _decision.decide(node, plan, repository, bool(check_mode), bool(sources_changed), str(host))


def driver_repository_requests(plan):
    """The plan -> what the repository is asked for before anything moves."""
    return _decision.repository_requests(_mapping(plan, "the plan", _PLAN_KEYS))


def driver_reboot_requests(decision, plan, changed, node_state):
    """The decision and what this run changed -> reboot request file name -> line."""
    return _decision.reboot_requests(_mapping(decision, "the decision", ("action", "target")), plan,
                                     changed or {}, node_state or {})


class FilterModule(object):
    def filters(self):
        return {"driver_decision": driver_decision, "driver_repository_requests": driver_repository_requests,
                "driver_reboot_requests": driver_reboot_requests}
