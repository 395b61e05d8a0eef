# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve


class StackPlanError(AnsibleFilterError):
    """A refused stack request; ``rule`` is the stable rule id."""

    def __init__(self, rule, message, alternatives=None):
        super().__init__(message)
        self.rule = rule
        self.alternatives = alternatives or []


def stack_plan(request, **overrides):
    if overrides:
        if not hasattr(request, "items"):
            raise StackPlanError("BAD_REQUEST", "stack_plan: [BAD_REQUEST] the stack request must be a mapping, not %r." % (request,))
        request = dict(request, **overrides)
    try:
        return solve(request)
    except StackError as exc:
        raise StackPlanError(exc.rule, "stack_plan: [%s] %s" % (exc.rule, exc.args[0]), exc.alternatives)


class FilterModule(object):
    def filters(self):
        return {"stack_plan": stack_plan}
