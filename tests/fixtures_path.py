"""Where the real captures live: tests/fixtures/ in the repository (copied from the project's shared
capture set with their SOURCES.md), so a clone and the built collection test without anything beside them."""
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
