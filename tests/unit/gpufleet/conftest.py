"""Fixtures of the CLI tests; the helpers themselves are in cli_helpers.py."""

import pytest


@pytest.fixture
def outside(tmp_path):
    """A working directory outside the clone, with no ansible.cfg."""
    work = tmp_path / "work"
    work.mkdir()
    return work
