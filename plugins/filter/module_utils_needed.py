# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""``path | gpufleet.cluster.module_utils_needed``: the collection's module_utils files a Python program imports.

A program the roles copy to nodes (the health check) runs without Ansible, from the parsers copied beside it.
Which files to copy is derived from the imports, followed transitively, so a parser that starts importing
another one can never leave the installed program dying on import (a hand-kept list did: nvlink.py imports
health, which imports more).
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

import ast
from pathlib import Path

from ansible.errors import AnsibleFilterError

PACKAGE = "ansible_collections.gpufleet.cluster.plugins.module_utils"
MODULE_UTILS = Path(__file__).resolve().parents[1] / "module_utils"


def _direct_imports(path: Path) -> set[str]:
    """Names of module_utils modules `path` imports itself (absolute, or relative within module_utils)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as exc:
        raise AnsibleFilterError(f"module_utils_needed: cannot read {path}: {exc}") from None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module == PACKAGE:
                names.update(alias.name for alias in node.names)
            elif node.level == 0 and module.startswith(PACKAGE + "."):
                names.add(module[len(PACKAGE) + 1:].split(".")[0])
            elif node.level == 1 and path.parent == MODULE_UTILS:
                names.update([module.split(".")[0]] if module else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            names.update(a.name[len(PACKAGE) + 1:].split(".")[0] for a in node.names if a.name.startswith(PACKAGE + "."))
    return {name for name in names if (MODULE_UTILS / f"{name}.py").is_file()}


def module_utils_needed(program, module_utils_dir=None) -> list[str]:
    """Sorted file names (``health.py``) of every module_utils module `program` needs, directly or not."""
    base = Path(module_utils_dir) if module_utils_dir else MODULE_UTILS
    path = Path(str(program))
    if not path.is_file():
        raise AnsibleFilterError(f"module_utils_needed: {program} is not a file")
    needed: set[str] = set()
    todo = _direct_imports(path)
    while todo:
        name = todo.pop()
        needed.add(name)
        todo |= _direct_imports(base / f"{name}.py") - needed
    return sorted(f"{name}.py" for name in needed)


class FilterModule:
    def filters(self):
        return {"module_utils_needed": module_utils_needed}
