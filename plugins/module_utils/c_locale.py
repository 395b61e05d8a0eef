# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""The environment the modules run tools in: the parsers read English labels and '.' decimals."""

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}
