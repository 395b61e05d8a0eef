"""No function over 80 lines in the product code (issue 26): a long function that does several jobs is
split along its seams, not let grow back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 80
# Every product Python file: the collection's plugins, the CLI, and the programs the roles copy to nodes.
PRODUCT_GLOBS = ("plugins/**/*.py", "gpufleet/**/*.py", "roles/*/files/**/*.py")  # ** matches no folder too
MODULES = sorted({str(p.relative_to(REPO)) for pattern in PRODUCT_GLOBS for p in REPO.glob(pattern)})


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


def test_the_product_code_is_found():
    assert {"plugins/module_utils/nccl_tests.py", "gpufleet/cli.py", "roles/smoke_test/files/gpufleet_smoke.py"} \
        <= set(MODULES)
