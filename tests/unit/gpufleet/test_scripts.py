"""tools/setup.sh takes any controller Python 3.10-3.13; tools/demo.sh runs as root and re-runs itself
through sudo for a user who has it."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from cli_helpers import REPO

PYENV = Path("/root/.pyenv/versions")


def _pythons(prefix):
    return sorted(PYENV.glob(f"{prefix}*/bin/python3")) if PYENV.is_dir() else []


@pytest.mark.parametrize("minor", ["3.10", "3.11", "3.12", "3.13"])
def test_setup_accepts_every_controller_python(minor):
    found = _pythons(minor + ".")
    if not found:
        pytest.skip(f"no Python {minor} on this machine")
    proc = subprocess.run(["bash", str(REPO / "tools" / "setup.sh"), "--check"], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": str(found[0])}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"Python {minor}" in proc.stdout and "would install -e . into" in proc.stdout


def test_setup_refuses_a_python_outside_the_range():
    found = _pythons("3.9.")
    if not found:
        pytest.skip("no Python 3.9 on this machine")
    proc = subprocess.run(["bash", str(REPO / "tools" / "setup.sh"), "--check"], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": str(found[0])}, check=False)
    assert proc.returncode == 2 and "is not Python 3.10-3.13" in proc.stderr


def _as_nobody(tmp_path, with_sudo):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as an unprivileged user")
    # pytest's tmp_path lies under a 0700 directory the unprivileged user cannot enter
    bindir = Path(tempfile.mkdtemp(prefix="gpufleet-demo-test-"))
    bindir.chmod(0o755)
    if with_sudo:
        fake = bindir / "sudo"
        fake.write_text('#!/bin/sh\necho "sudo called with: $*"\n')
        fake.chmod(0o755)
    path = f"{bindir}:/usr/bin:/bin"
    # A copy of the script, since the clone itself may lie where that user cannot enter (CI, mktemp -d).
    (bindir / "tools").mkdir(mode=0o755)
    script = bindir / "tools" / "demo.sh"
    shutil.copy(REPO / "tools" / "demo.sh", script)
    script.chmod(0o755)
    try:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", f"PATH={path}",
                   "bash", str(script)]
        return subprocess.run(command, capture_output=True, text=True, check=False, cwd="/", timeout=60), script
    finally:
        shutil.rmtree(bindir)


def test_demo_reruns_itself_through_sudo_for_a_user(tmp_path):
    proc, script = _as_nobody(tmp_path, with_sudo=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"sudo called with: -- bash {script}"


def test_demo_without_root_or_sudo_says_why(tmp_path):
    proc, _script = _as_nobody(tmp_path, with_sudo=False)
    assert proc.returncode == 2 and "sudo is not installed" in proc.stderr
