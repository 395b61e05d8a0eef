# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filter over plugins/module_utils/report_writer.py: the one default report directory."""

from __future__ import annotations

DOCUMENTATION = r"""
name: report_dir
short_description: The controller's report directory, with the one default every stage uses
description:
  - Returns the input when it is set (C(gpufleet_report_dir)), else the environment variable
    C(GPUFLEET_REPORT_DIR), else C(reports/) under the current directory of C(ansible-playbook).
positional: _input
options:
  _input:
    description: The configured directory (C(gpufleet_report_dir)); none or empty for the default.
    type: raw
    required: true
"""

EXAMPLES = r"""
preflight_report_dir: "{{ gpufleet_report_dir | default(none) | gpufleet.cluster.report_dir }}"
"""

RETURN = r"""
_value:
  description: The report directory.
  type: str
"""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer


def report_dir(configured):
    if configured is not None and not isinstance(configured, str):
        raise AnsibleFilterError("gpufleet_report_dir must be a directory path, got %r" % (configured,))
    return report_writer.report_dir(configured, os.environ, os.getcwd())


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"report_dir": report_dir}
