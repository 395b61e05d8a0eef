# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/profiles.py: the per-node half of preflight.

- ``gpu_info | gpufleet.cluster.preflight_node_summary(rdma_info, host_info)``
- ``name | gpufleet.cluster.preflight_profile(builtin_profiles, custom_profiles)``
- ``summary | gpufleet.cluster.preflight_findings(profile, node=..., cluster_size=...,
  supported_os=[...], module_signing={...})``
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

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


class FilterModule(object):
    def filters(self):
        return {
            "preflight_node_summary": preflight_node_summary,
            "preflight_profile": preflight_profile,
            "preflight_findings": preflight_findings,
        }
