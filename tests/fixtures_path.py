"""Where the real captures live: ../shared/fixtures beside the repository."""
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
