# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/homogeneity.py: the cluster half of preflight.

- ``{node: summary} | gpufleet.cluster.homogeneity(properties, allow_mixed)``
- ``report | gpufleet.cluster.homogeneity_findings(severity='fail')``
- ``summaries | gpufleet.cluster.preflight_report(cluster=..., profile=..., mode=..., ...)``
- ``report | gpufleet.cluster.preflight_markdown`` / ``preflight_summary_table(nodes)``
- ``report | gpufleet.cluster.preflight_failure_messages(node)``
- ``report | gpufleet.cluster.preflight_console(report_dir)``: what the run prints once
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import homogeneity as _h


def homogeneity(nodes, properties=None, allow_mixed=None):
    if not isinstance(nodes, dict):
        raise AnsibleFilterError("gpufleet.cluster.homogeneity: input must be a mapping of node -> properties, got %s"
                                 % type(nodes).__name__)
    for name, facts in nodes.items():
        if facts is not None and not isinstance(facts, dict):
            raise AnsibleFilterError("gpufleet.cluster.homogeneity: properties of node %s must be a mapping" % name)
    return _h.homogeneity(nodes, list(properties) if properties is not None else None, allow_mixed)


def homogeneity_findings(report, severity="fail"):
    if severity not in ("fail", "warn"):
        raise AnsibleFilterError("gpufleet.cluster.homogeneity_findings: severity must be fail or warn")
    return _h.outlier_findings(report, severity)


def preflight_report(summaries, cluster=None, profile=None, mode=None, findings=None, homogeneity=None,
                     homogeneity_findings=None, plan=None, plan_error=None):
    if not isinstance(summaries, dict):
        raise AnsibleFilterError("gpufleet.cluster.preflight_report: input must be a mapping of node -> summary")
    return _h.build_report(cluster, profile, mode, summaries, findings, homogeneity,
                           homogeneity_findings, plan, plan_error or None)


def preflight_markdown(report):
    return _h.render_markdown(report)


def preflight_summary_table(report, nodes=None):
    return _h.summary_table(report, nodes)


def preflight_console(report, report_dir=None):
    return _h.console_text(report, report_dir)


def preflight_failure_messages(report, node):
    return _h.failure_messages(report, node)


class FilterModule(object):
    def filters(self):
        return {
            "homogeneity": homogeneity,
            "homogeneity_findings": homogeneity_findings,
            "preflight_report": preflight_report,
            "preflight_markdown": preflight_markdown,
            "preflight_summary_table": preflight_summary_table,
            "preflight_failure_messages": preflight_failure_messages,
            "preflight_console": preflight_console,
        }
