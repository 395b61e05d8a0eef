"""No function over 80 lines in the modules split along their seams (issue 26): a long function
that does several jobs is split again, not let grow back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 80
MODULES = [
    "plugins/module_utils/smoke_parse.py",
    "plugins/module_utils/smoke_report.py",
    "plugins/module_utils/smoke_verdict.py",
    "plugins/module_utils/smoke_render.py",
    "plugins/module_utils/report_writer.py",
    "plugins/module_utils/nvidia_smi.py",
    "plugins/module_utils/stack_solver.py",
    "plugins/module_utils/profiles.py",
    "plugins/action/smoke_report.py",
    "roles/smoke_test/files/gpufleet_smoke.py",
]


def long_functions(path, root=REPO):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                yield "%s:%d %s (%d lines)" % (path.relative_to(root), node.lineno, node.name, lines)


@pytest.mark.parametrize("module", MODULES)
def test_no_function_over_80_lines(module):
    assert list(long_functions(REPO / module)) == []


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join("    x = %d" % i for i in range(MAX_LINES))
    sample = tmp_path / "sample.py"
    sample.write_text("def short():\n    return 1\n\n\ndef long():\n%s\n" % body)
    assert [s.split()[1] for s in long_functions(sample, tmp_path)] == ["long"]
