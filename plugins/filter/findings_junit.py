# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filter over plugins/module_utils/findings_junit.py."""

from __future__ import annotations

DOCUMENTATION = r"""
name: findings_junit
short_description: Render findings as JUnit XML, one test case per node and check
description:
  - A fail-level finding of a check on a node makes that case a failure; a check listed as not
    checked for the node makes it skipped with the reason; otherwise it passes (warnings in its output).
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
    description: Check names (dcgm, nvlink, fabric, ib_counters, bandwidth).
    type: list
    elements: str
  not_checked:
    description: Node name to a list of C(check), C(reason) entries.
    type: dict
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

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings_junit import render_findings_junit


def findings_junit(findings, nodes, checks, not_checked=None, suite="gpufleet"):
    if not isinstance(findings, list):
        raise AnsibleFilterError("findings_junit needs a list of findings, got %r" % type(findings).__name__)
    return render_findings_junit(suite, list(nodes or []), list(checks or []), findings, not_checked or {})


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"findings_junit": findings_junit}
