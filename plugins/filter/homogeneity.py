# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/homogeneity.py: the cluster half of preflight.

- ``{node: summary} | gpufleet.cluster.homogeneity(properties, allow_mixed, expected)``
- ``report | gpufleet.cluster.homogeneity_findings(severity='fail')``

The preflight report built from it has its own filters: plugins/filter/preflight_report.py.
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import homogeneity as _h


def homogeneity(nodes, properties=None, allow_mixed=None, expected=None):
    if not isinstance(nodes, dict):
        raise AnsibleFilterError("gpufleet.cluster.homogeneity: input must be a mapping of node -> properties, got %s"
                                 % type(nodes).__name__)
    for name, facts in nodes.items():
        if facts is not None and not isinstance(facts, dict):
            raise AnsibleFilterError("gpufleet.cluster.homogeneity: properties of node %s must be a mapping" % name)
    if expected is not None and not isinstance(expected, dict):
        raise AnsibleFilterError("gpufleet.cluster.homogeneity: expected must be a mapping of property -> value, got %r"
                                 % (expected,))
    return _h.homogeneity(nodes, list(properties) if properties is not None else None, allow_mixed, expected)


def homogeneity_findings(report, severity="fail"):
    if severity not in ("fail", "warn"):
        raise AnsibleFilterError("gpufleet.cluster.homogeneity_findings: severity must be fail or warn")
    return _h.outlier_findings(report, severity)


class FilterModule(object):
    def filters(self):
        return {
            "homogeneity": homogeneity,
            "homogeneity_findings": homogeneity_findings,
        }
