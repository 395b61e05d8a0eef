"""roles/pytorch/files/torch_probe.py: the fingerprint that lets a converged node skip importing torch.

A re-run trusts the last verified import only while the fingerprint is unchanged, so everything the
import depends on must move it: a package's version, any of its installed files, a file removed.
A throwaway distribution stands in for torch's packages (the probe treats them alike).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[3] / "roles" / "pytorch" / "files" / "torch_probe.py"


@pytest.fixture
def site(tmp_path):
    package = tmp_path / "fakepkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    info = tmp_path / "fakepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("fakepkg/__init__.py,,\nfakepkg-1.0.dist-info/METADATA,,\nfakepkg-1.0.dist-info/RECORD,,\n")
    return tmp_path


def probe(site: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, str(PROBE), "--extras=fakepkg"], env=env, capture_output=True,
                          text=True, check=True, timeout=120)
    return json.loads(proc.stdout.splitlines()[-1])


def test_unchanged_environment_gives_the_same_fingerprint(site):
    first, second = probe(site), probe(site)
    assert first["packages"]["fakepkg"] == "1.0"
    assert len(first["fingerprint"]) == 64
    assert first["fingerprint"] == second["fingerprint"]


def test_an_edited_file_moves_the_fingerprint(site):
    before = probe(site)["fingerprint"]
    with (site / "fakepkg" / "__init__.py").open("a") as handle:
        handle.write("raise ImportError('edited')\n")
    assert probe(site)["fingerprint"] != before


def test_a_file_touched_without_a_size_change_moves_the_fingerprint(site):
    before = probe(site)["fingerprint"]
    target = site / "fakepkg" / "__init__.py"
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert probe(site)["fingerprint"] != before


def test_a_removed_file_moves_the_fingerprint(site):
    before = probe(site)["fingerprint"]
    (site / "fakepkg" / "__init__.py").unlink()
    assert probe(site)["fingerprint"] != before


def test_a_moved_version_moves_the_fingerprint(site):
    before = probe(site)
    (site / "fakepkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.1\n")
    after = probe(site)
    assert after["packages"]["fakepkg"] == "1.1"
    assert after["fingerprint"] != before["fingerprint"]
