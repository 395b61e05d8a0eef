# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Documentation shared by the read-only modules (facts and evaluation): nothing on the node changes."""


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads, so check mode runs it unchanged.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
"""
