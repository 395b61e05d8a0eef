# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/profiles.py: the per-node half of preflight.

- ``gpu_info | gpufleet.cluster.preflight_node_summary(rdma_info, host_info)``
- ``name | gpufleet.cluster.preflight_profile(builtin_profiles, custom_profiles)``
- ``summary | gpufleet.cluster.preflight_findings(profile, node=..., cluster_size=...,
  supported_os=[...], module_signing={...})``
- ``request | gpufleet.cluster.preflight_config_problems(profile=..., builtin_profiles=..., custom_profiles=...,
  variables=[...])``: what is wrong with the configuration, before any node is touched
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import request_schema

from ansible_collections.gpufleet.cluster.plugins.module_utils.profiles import (
    ProfileError,
    check_node,
    node_summary,
    resolve_profile,
)


def _mapping(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("gpufleet.cluster.preflight_node_summary: %s must be a dict, got %s"
                                 % (what, type(value).__name__))
    return value


def preflight_node_summary(gpu_info, rdma_info=None, host_info=None):
    return node_summary(_mapping(gpu_info, "gpu_info"), _mapping(rdma_info, "rdma_info"),
                        _mapping(host_info, "host_info"))


def preflight_profile(name, builtin_profiles, custom_profiles=None, name_var="gpufleet_profile",
                      builtin_var="preflight_profiles", custom_var="gpufleet_custom_profiles"):
    try:
        return resolve_profile(name, builtin_profiles, custom_profiles, builtin_var=builtin_var,
                               custom_var=custom_var, name_var=name_var)
    except ProfileError as exc:
        raise AnsibleFilterError("gpufleet.cluster.preflight_profile: %s" % exc)


def preflight_findings(summary, profile, node=None, cluster_size=1, supported_os=None, module_signing=None):
    if not isinstance(summary, dict) or not isinstance(profile, dict):
        raise AnsibleFilterError("gpufleet.cluster.preflight_findings: needs a node summary and a resolved profile")
    try:
        size = int(cluster_size)
    except (TypeError, ValueError):
        raise AnsibleFilterError("gpufleet.cluster.preflight_findings: cluster_size must be an integer, got %r" % (cluster_size,))
    return check_node(node, summary, profile, cluster_size=size,
                      supported_os=list(supported_os) if supported_os else None,
                      module_signing=module_signing or None)


# The collection's root: its roles declare gpufleet's public variables.
_COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KNOWN_VARIABLES = []


def _yaml_file(path):
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError):
        return {}


def known_variables(root=_COLLECTION_ROOT):
    """gpufleet's variables, derived rather than listed: every role's argument_specs options, and every
    gpufleet_* name its roles and playbooks read."""
    import glob
    import re

    if _KNOWN_VARIABLES and root == _COLLECTION_ROOT:
        return _KNOWN_VARIABLES
    names = set()
    for path in glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml")):
        for entry in (_yaml_file(path).get("argument_specs") or {}).values():
            names.update((entry or {}).get("options") or {})
    sources = glob.glob(os.path.join(root, "roles", "*", "*", "*.yml")) + glob.glob(os.path.join(root, "playbooks", "**", "*.yml"), recursive=True)
    for path in sources:
        try:
            with open(path, encoding="utf-8") as handle:
                names.update(re.findall(r"\bgpufleet_[a-z0-9_]+", handle.read()))
        except OSError:
            continue
    if root == _COLLECTION_ROOT:
        _KNOWN_VARIABLES.extend(sorted(names))
    return sorted(names)


def _builtin_profiles(root=_COLLECTION_ROOT):
    return _yaml_file(os.path.join(root, "roles", "preflight", "defaults", "main.yml")).get("preflight_profiles") or {}


def preflight_config_problems(request, profile=None, builtin_profiles=None, custom_profiles=None, variables=None,
                              request_var="gpufleet_stack_request"):
    """Every configuration problem found without the nodes, one ``[CODE] ...`` line each (see
    plugins/module_utils/request_schema.py): the stack request, the profile and near-miss variable names."""
    problems = request_schema.variable_problems(variables or [], known_variables())
    problems += request_schema.request_problems(request, request_var)
    builtin = builtin_profiles if builtin_profiles is not None else _builtin_profiles()
    known = set(builtin if isinstance(builtin, dict) else {}) | set(custom_profiles if isinstance(custom_profiles, dict) else {})
    if isinstance(profile, str) and profile and known and profile not in known:
        close = request_schema.nearest(profile, known)
        return problems + [request_schema.problem(
            "UNKNOWN_PROFILE", "gpufleet_profile: unknown profile %r (%s); profiles: %s."
            % (profile, "did you mean %s?" % " or ".join(repr(c) for c in close) if close else "no profile is close",
               ", ".join(sorted(known))))]
    try:
        resolve_profile(profile or "training", builtin, custom_profiles, name_var="gpufleet_profile",
                        custom_var="gpufleet_custom_profiles")
    except ProfileError as exc:
        text = str(exc)
        problems.append(text if request_schema.CONFIG_ERROR.match(text) else request_schema.problem("BAD_PROFILE", text))
    return problems


class FilterModule(object):
    def filters(self):
        return {
            "preflight_config_problems": preflight_config_problems,
            "preflight_node_summary": preflight_node_summary,
            "preflight_profile": preflight_profile,
            "preflight_findings": preflight_findings,
        }
