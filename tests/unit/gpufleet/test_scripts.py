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


def _fake_clone(root: Path) -> Path:
    """A clone whose setup, simulator and gpufleet only record what the demo asks of them."""
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO / "tools" / "demo.sh", root / "tools" / "demo.sh")
    (root / "tools" / "setup.sh").write_text("exit 0\n")
    (root / "tests" / "sim").mkdir(parents=True)
    (root / "tests" / "sim" / "simcluster.py").write_text("")
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(shutil.which("python3"))
    gpufleet = venv_bin / "gpufleet"
    # What `gpufleet run` needs of the directory: absent, or empty (artifacts.py claims only those).
    gpufleet.write_text('#!/bin/sh\nwhile [ "$1" != --artifacts ]; do shift; done\n'
                        '[ ! -e "$2" ] || [ -z "$(ls -A "$2")" ] || { echo "refused: $2" >&2; exit 2; }\n'
                        'echo "$2" >> "$(dirname "$0")/artifacts.log"\n')
    gpufleet.chmod(0o755)
    return root


def test_demo_gives_every_run_a_fresh_artifacts_directory_and_says_where(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the demo runs as root (or re-runs itself through sudo)")
    clone = _fake_clone(tmp_path / "clone")
    # What an older gpufleet left: reports/demo without the marker file, which gpufleet run refuses.
    (clone / "reports" / "demo").mkdir(parents=True)
    (clone / "reports" / "demo" / "summary.json").write_text("{}")
    runs = [subprocess.run(["bash", str(clone / "tools" / "demo.sh")], capture_output=True, text=True, check=False,
                           cwd="/", timeout=60) for _run in range(2)]
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    used = (clone / ".venv" / "bin" / "artifacts.log").read_text().split()
    assert len(set(used)) == 2 and all(path.startswith("reports/demo-") for path in used)
    for run, path in zip(runs, used):
        assert f"demo: this run's artifacts go to {clone}/{path}" in run.stderr
        assert f"Reports:  {clone}/{path}/summary.json" in run.stdout
    assert (clone / "reports" / "demo" / "summary.json").read_text() == "{}"
