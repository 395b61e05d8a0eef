"""`ansible-test sanity` on the gpufleet.cluster collection, through tools/sanity.sh.

Slow (about 1 min warm, several cold: it builds ansible-test's per-test venvs from PyPI), so it is
marked `slow`; deselect it with `-m "not slow"`. It fails on every sanity finding, in any file.
"""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "sanity.sh"
# tools/sanity.sh exits 3 only when PyPI will not give it the pip wheel for the bootstrap stub.
NO_BOOTSTRAP_WHEEL = 3


def _run(*args, timeout):
    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_ansible_test_sanity_passes():
    prepared = _run("--prepare", timeout=600)
    if prepared.returncode == NO_BOOTSTRAP_WHEEL:
        pytest.skip("ansible-test sanity needs pip's wheel from PyPI for its venv bootstrap, and the "
                    "download failed: " + prepared.stdout.strip()[-500:])
    assert prepared.returncode == 0, prepared.stdout[-3000:]

    result = _run(timeout=1500)
    if result.returncode != 0:
        # The findings (file:line:col: code: message) and the failed tests' names; the whole output
        # if ansible-test died before it could report any.
        findings = [line for line in result.stdout.splitlines() if line.startswith(("ERROR:", "FATAL:", "[ERROR]"))]
        pytest.fail(f"ansible-test sanity failed (rc {result.returncode}):\n"
                    + "\n".join(findings or [result.stdout[-5000:]]), pytrace=False)
