# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What the README and docs/architecture.md say the tree holds is what it holds.

The README's layout table names every role, module and playbook (and nothing that is gone);
docs/architecture.md names each of them too, and every filter file; every role has a README; the
Python files carry the collection's Apache-2.0 header. A new role, module or playbook fails here
until the docs name it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TICKED = re.compile(r"`([^`]+)`")

# Being rewritten elsewhere (issue 26) when this was written: each entry must go once its file is fixed.
ROLES_WITHOUT_README: set[str] = set()
# Every Python file carries the Apache-2.0 header (nvidia_smi.py was the last GPL one, issue 26).
GPL_HEADER_PENDING: set[str] = set()


def roles() -> set[str]:
    return {p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()}


def modules() -> set[str]:
    return {p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"}


def playbooks() -> set[str]:
    return {p.stem for p in (REPO / "playbooks").glob("*.yml")}


def filter_files() -> set[str]:
    return {p.stem for p in (REPO / "plugins" / "filter").glob("*.py") if p.stem != "__init__"}


def layout_row(path_cell: str) -> set[str]:
    """The names in backticks in the 'what' cell of the README layout row whose path cell starts so."""
    layout = (REPO / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    for line in layout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith(path_cell):
            return set(TICKED.findall(cells[1]))
    raise AssertionError(f"README.md's layout table has no row for {path_cell}")


@pytest.mark.parametrize("path_cell, present", [
    ("`roles/`", roles), ("`plugins/modules/`", modules), ("`playbooks/`", playbooks)])
def test_the_readme_layout_names_exactly_what_exists(path_cell, present):
    named = layout_row(path_cell)
    assert present(), f"nothing found for {path_cell}: the check would prove nothing"
    assert present() - named == set(), f"in the tree but not in README.md's layout ({path_cell})"
    assert named - present() == set(), f"in README.md's layout but not in the tree ({path_cell})"


@pytest.mark.parametrize("present", [roles, modules, playbooks, filter_files])
def test_the_architecture_page_names_every_role_module_playbook_and_filter_file(present):
    named = set(TICKED.findall((REPO / "docs" / "architecture.md").read_text()))
    named |= {Path(n).stem for n in named if n.startswith("playbooks/")}
    named |= {n.rsplit(".", 1)[-1] for n in named if n.startswith("gpufleet.cluster.")}
    assert present() - named == set()


def test_every_role_has_a_readme():
    missing = {r for r in roles() if not (REPO / "roles" / r / "README.md").is_file()}
    assert missing == ROLES_WITHOUT_README, "a role without a README, or one that got its README: update the list"


def test_python_files_carry_the_apache_header_not_a_gpl_one():
    gpl = {str(p.relative_to(REPO)) for base in ("plugins", "tests", "roles", "gpufleet")
           for p in (REPO / base).rglob("*.py") if "GNU General Public License" in p.read_text(errors="replace")[:400]}
    assert gpl == GPL_HEADER_PENDING, "a GPL header appeared, or a pending file was fixed: update the list"
