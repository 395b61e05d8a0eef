# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/preflight_report.py: the preflight report and what is shown of it.

- ``summaries | gpufleet.cluster.preflight_report(cluster=..., profile=..., mode=..., ...)``
- ``report | gpufleet.cluster.preflight_markdown`` / ``preflight_summary_table(nodes)``
- ``report | gpufleet.cluster.preflight_failure_messages(node)``
- ``report | gpufleet.cluster.preflight_console(report_dir)``: what the run prints once
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import preflight_report as _report


def preflight_report(summaries, cluster=None, profile=None, mode=None, findings=None, homogeneity=None,
                     homogeneity_findings=None, plan=None, plan_error=None):
    if not isinstance(summaries, dict):
        raise AnsibleFilterError("gpufleet.cluster.preflight_report: input must be a mapping of node -> summary")
    return _report.build_report(cluster, profile, mode, summaries, findings, homogeneity,
                                homogeneity_findings, plan, plan_error or None)


def preflight_markdown(report):
    return _report.render_markdown(report)


def preflight_summary_table(report, nodes=None):
    return _report.summary_table(report, nodes)


def preflight_console(report, report_dir=None):
    return _report.console_text(report, report_dir)


def preflight_failure_messages(report, node):
    return _report.failure_messages(report, node)


class FilterModule(object):
    def filters(self):
        return {
            "preflight_report": preflight_report,
            "preflight_markdown": preflight_markdown,
            "preflight_summary_table": preflight_summary_table,
            "preflight_failure_messages": preflight_failure_messages,
            "preflight_console": preflight_console,
        }
