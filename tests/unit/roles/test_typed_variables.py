"""Booleans and numbers that can come from `-e name=value` are converted where they are used.

`-e reboot_ok=true` and `-e rdma_expected_rate_gbps=400` arrive as strings; ansible-core 2.19
refuses a string as a conditional ("Conditional result ... derived from value of type 'str'") and
compares strings with numbers wrongly. Every use of a bool- or int-typed role option (as declared in
meta/argument_specs.yml) inside a conditional or a Jinja expression must pass through `| bool` or
`| int`. The `-e` runs themselves are in test_slurm_drain.py and test_reboot_safety.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"
# nccl_config declares no bool or int options.
CHECKED_ROLES = ["rdma", "slurm_drain", "reboot"]
CONDITIONAL_KEYS = {"when", "until", "failed_when", "changed_when"}
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
FILTER_FOR = {"bool": r"bool", "int": r"(int|float)", "float": r"(int|float)"}


def typed_options(role: str) -> dict[str, str]:
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    return {name: o["type"] for name, o in options.items() if o.get("type") in FILTER_FOR}


def expressions(value, conditional: bool = False):
    """The Jinja expressions in a task value: conditionals whole, other strings their {{ }}/{% %} blocks."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from expressions(item, conditional=key in CONDITIONAL_KEYS)
    elif isinstance(value, list):
        for item in value:
            yield from expressions(item, conditional)
    elif isinstance(value, str):
        if conditional:
            yield value
        else:
            yield from JINJA.findall(value)


def untyped_uses(role: str) -> list[str]:
    options = typed_options(role)
    found = []
    sources = [(p, expressions(yaml.safe_load(p.read_text()))) for p in sorted((ROLES / role).glob("tasks/*.yml"))]
    sources += [(p, JINJA.findall(p.read_text())) for p in sorted((ROLES / role).rglob("templates/**/*.j2"))]
    for path, exprs in sources:
        for expr in exprs:
            for name, kind in options.items():
                for match in re.finditer(rf"(?<![\w.]){name}\b", expr):
                    if not re.match(rf"\s*\|\s*{FILTER_FOR[kind]}\b", expr[match.end():]):
                        found.append(f"{path.relative_to(ROLES)}: {name} ({kind}) in {expr.strip()!r}")
    return found


@pytest.mark.parametrize("role", CHECKED_ROLES)
def test_typed_options_are_converted_where_used(role):
    assert typed_options(role), f"{role} declares no bool/int options: the check would prove nothing"
    assert untyped_uses(role) == []
