# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filter over plugins/module_utils/report_writer.py: a stage's findings as JUnit XML."""

from __future__ import annotations

DOCUMENTATION = r"""
name: findings_junit
short_description: Render findings as JUnit XML, one test case per node and check
description:
  - One test case per node and check (per node when O(checks) is empty). A fail-level finding of the
    check on the node makes the case a failure; a check listed as not checked for the node makes it
    skipped with the reason; otherwise it passes (warnings in its output).
  - Not-checked entries no case covers (a node left out, a cluster-wide check) become skipped cases of
    their own, and findings of no listed node a case of their own, so nothing unchecked reads as a pass.
positional: _input, nodes, checks, not_checked
options:
  _input:
    description: Findings (code, severity, node, message).
    type: list
    elements: dict
    required: true
  suite:
    description: Test suite name.
    type: str
    default: gpufleet
  nodes:
    description: Node names.
    type: list
    elements: str
  checks:
    description: Check names (dcgm, nvlink, fabric, ib_counters, bandwidth); empty for one case per node.
    type: list
    elements: str
  not_checked:
    description: >-
      Node name to a list of C(check), C(reason) entries, or a list of C(check), C(reason) and optional
      C(node) entries.
    type: raw
  nodes_not_checked:
    description: Nodes that were not checked at all (unreachable, failed before the verdict).
    type: list
    elements: str
  not_checked_reason:
    description: The reason given for O(nodes_not_checked).
    type: str
    default: not checked
"""

EXAMPLES = r"""
- name: Write diagnostics JUnit
  ansible.builtin.copy:
    content: "{{ findings | gpufleet.cluster.findings_junit(nodes, ['dcgm', 'nvlink'], not_checked, suite='gpufleet.diagnostics') }}"
    dest: reports/diagnostics.junit.xml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: JUnit XML text.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer


def findings_junit(findings, nodes, checks=None, not_checked=None, suite="gpufleet", nodes_not_checked=None,
                   not_checked_reason="not checked"):
    if not isinstance(findings, list):
        raise AnsibleFilterError("findings_junit needs a list of findings, got %r" % type(findings).__name__)
    cases = report_writer.findings_cases(findings, list(nodes or []), list(checks or []), not_checked,
                                         list(nodes_not_checked or []), not_checked_reason)
    return report_writer.render_junit(suite, cases, failure_type="NodeCheckFailed")


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"findings_junit": findings_junit}
